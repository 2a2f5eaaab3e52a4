package pglock

import (
	"crypto/sha256"
	"encoding/binary"
	"strconv"
	"strings"
)

// KeyPrefix marks a lock name that carries an explicit advisory lock key:
// "pg_advisory:42" locks key 42, the same lock as pg_advisory_lock(42) in
// other code. A name with this prefix whose rest is not a decimal int64 is
// hashed like any other name.
const KeyPrefix = "pg_advisory:"

// Key returns the 64-bit advisory lock key of a lock name: the explicit key
// of a KeyPrefix name, otherwise the first eight bytes of SHA-256(name)
// read as a big-endian signed integer. The same key in SQL:
//
//	('x' || left(encode(sha256(convert_to(name, 'UTF8')), 'hex'), 16))::bit(64)::bigint
//
// Two distinct hashed names share a key with probability 2^-64; among n
// names in use the chance that any two collide is about n²/2^65 (one in
// 37 billion for a million names). A collision makes the two names one
// lock: never a double grant, only needless waiting. Explicit keys are not
// hashed, so a hashed name can land on an explicit key with probability
// 2^-64 per pair as well.
func Key(name string) int64 {
	if k, ok := explicitKey(name); ok {
		return k
	}
	sum := sha256.Sum256([]byte(name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// KeyName returns the lock name that stands for the explicit advisory key k.
func KeyName(k int64) string { return KeyPrefix + strconv.FormatInt(k, 10) }

func explicitKey(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, KeyPrefix)
	if !ok {
		return 0, false
	}
	k, err := strconv.ParseInt(rest, 10, 64)
	return k, err == nil
}
