package dlock

import (
	"crypto/rand"
	"encoding/hex"
)

// newToken returns 128 bits from crypto/rand, hex-encoded. crypto/rand.Read
// never fails on supported platforms (it panics internally if the kernel
// cannot supply randomness), so there is no error path to get wrong.
func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
