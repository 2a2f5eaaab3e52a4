package etcdlock

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"strings"
)

// A held key's value is its owner followed by tokenMark and the hex
// SHA-256 digest of the token it was granted to: "OWNER\x00sha256 HEX". A
// waiter's key whose wait has a deadline carries the same after its
// waiting prefix (see waitMark). The digest lets any client prove that a
// token holds the key (Adopt, and token-checked releases) without the
// token itself being stored in etcd, where everyone who can read the
// prefix could learn it. Owners contain no control characters
// (dlock.WithOwner refuses them), so the last tokenMark in a value is the
// digest's. Holders, listings and inspection show the owner alone. A
// value written without a digest (by an earlier version of this driver)
// reads as before: its owner is the whole value, and no token proves it
// holds the key.
const tokenMark = "\x00sha256 "

// tokenDigest is the hex SHA-256 digest of token.
func tokenDigest(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// heldValue is the value of a key held by token for owner.
func heldValue(owner, token string) string { return owner + tokenMark + tokenDigest(token) }

// splitDigest returns v without its token digest, and the digest ("" when
// v has none).
func splitDigest(v []byte) (body, digest string) {
	s := string(v)
	i := strings.LastIndex(s, tokenMark)
	if i < 0 {
		return s, ""
	}
	return s[:i], s[i+len(tokenMark):]
}

// heldBy reports whether v is the value of a key held (not waited for) by
// token: it bears token's digest and no waiting prefix.
func heldBy(v []byte, token string) bool {
	body, digest := splitDigest(v)
	if digest == "" || strings.HasPrefix(body, waitMark) {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(digest), []byte(tokenDigest(token))) == 1
}
