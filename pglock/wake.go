package pglock

import (
	"crypto/rand"
	"encoding/hex"
)

// Each lease-mode driver has a NOTIFY channel of its own, its wake
// channel, on which its listener hears the releases that wake its
// waiters. A waiter's entry in a row's queue of waiters is its element,
// "TOKEN@CHANNEL", and a release notifies the head's channel alone (see
// notifyHead), with the token as the payload: one Locker's listening
// connection hears it, not every Locker's. With one channel for the
// table, as before, every listening connection heard every release,
// and sixteen Lockers contending on one name spent their time parsing
// and discarding fifteen notifications in sixteen.
//
// An element without "@" is a token queued by an earlier version, whose
// listeners hear the table's channel: the release notifies that channel
// then, and every listener still LISTENs on it.

// wakePrefix starts every wake channel's name; 16 random hex digits
// follow (27 bytes, within PostgreSQL's 63 for a channel).
const wakePrefix = "dlock_wake_"

// newWakeChannel names a driver's wake channel.
func newWakeChannel() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return wakePrefix + hex.EncodeToString(b[:])
}

// element is token's entry in a row's queue of waiters, naming this
// driver's wake channel. Tokens never hold "@" (the portable layer's are
// hex).
func (d *leases) element(token string) string { return token + "@" + d.wake }
