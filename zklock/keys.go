package zklock

import (
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// The znode layout: ROOT/escape(NAME)/_c_TOKEN-NONCE-lock-SEQUENCE, one
// ephemeral sequential node per contender (holder and waiters) of NAME.
// The "_c_" + GUID prefix is Apache Curator's "protected" name: a client
// whose create reply was lost finds its node again by it. The GUID is the
// dlock token, so a lock is released by token alone; NONCE tells apart the
// attempts of one token, so that cleaning up after one never deletes
// another's node.
const (
	protectedPrefix = "_c_"
	lockSuffix      = "-lock-"
	seqDigits       = 10 // ZooKeeper's sequence suffix: %010d
)

// dir is the parent znode of name's contenders.
func (d *zkDriver) dir(name string) string { return d.root + "/" + escapeName(name) }

// escapeName makes name one znode path component: "/" and other bytes
// ZooKeeper or URLs treat specially are %-escaped, as are "." and "..".
func escapeName(name string) string {
	e := strings.ReplaceAll(url.PathEscape(name), "/", "%2F")
	if e == "." || e == ".." {
		e = strings.ReplaceAll(e, ".", "%2E")
	}
	return e
}

// unescapeName reverses escapeName.
func unescapeName(e string) (string, bool) {
	n, err := url.PathUnescape(e)
	return n, err == nil
}

// tokenPrefix starts the names of every node of token.
func tokenPrefix(token string) string { return protectedPrefix + token + "-" }

// attemptPrefix is the name of one attempt's node before ZooKeeper
// appends the sequence number.
func attemptPrefix(token string) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return tokenPrefix(token) + hex.EncodeToString(b[:]) + lockSuffix
}

// contender is one child of a lock's znode.
type contender struct {
	name string // the child's name (not its path)
	seq  int64
}

// sequence parses a contender's sequence number: the last ten digits of
// any child whose name ends in "lock-" and ten digits (so that nodes of
// other clients of the same recipe, such as zk.NewLock's, count too).
func sequence(child string) (int64, bool) {
	if len(child) < seqDigits || !strings.HasSuffix(child[:len(child)-seqDigits], "lock-") {
		return 0, false
	}
	n, err := strconv.ParseInt(child[len(child)-seqDigits:], 10, 64)
	return n, err == nil
}

// queue sorts children into the lock's queue: lowest sequence first.
func queue(children []string) []contender {
	q := make([]contender, 0, len(children))
	for _, c := range children {
		if seq, ok := sequence(c); ok {
			q = append(q, contender{c, seq})
		}
	}
	slices.SortFunc(q, func(a, b contender) int { return int(a.seq - b.seq) })
	return q
}

// owned reports whether child belongs to token.
func owned(child, token string) bool { return strings.HasPrefix(child, tokenPrefix(token)) }
