package pglock

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// Each lease-mode driver has a NOTIFY channel of its own, its wake
// channel, on which its listener hears the releases that concern its
// waiters. A waiter's entry in a row's queue of waiters is its element,
// "TOKEN@CHANNEL@DEADLINE@OWNER", and a release notifies the head's
// channel alone, with the token first in the payload: one Locker's
// listening connection hears it, not every Locker's. With one channel
// for the table, as before, every listening connection heard every
// release, and sixteen Lockers contending on one name spent their time
// parsing and discarding fifteen notifications in sixteen. The owner
// lets a release grant the lock to the head outright (see
// leaseReleaseHandOff), and the deadline, the database time the waiter
// gives up, keeps it from granting a waiter that has already left: the
// payload is then a hand-off, "TOKEN p FENCE MICROS".
//
// An element without "@" is a token queued by an earlier version, whose
// listeners hear the table's channel: the release reserves the lock for
// it and notifies that channel, on which every listener still LISTENs.

// wakePrefix starts every wake channel's name; 16 random hex digits
// follow (27 bytes, within PostgreSQL's 63 for a channel).
const wakePrefix = "dlock_wake_"

// newWakeChannel names a driver's wake channel.
func newWakeChannel() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return wakePrefix + hex.EncodeToString(b[:])
}

// element is req's entry in a row's queue of waiters,
// "TOKEN@CHANNEL@DEADLINE@OWNER": this driver's wake channel, the
// database time in microseconds at which ctx's wait ends (empty when it
// has no deadline, or the database clock is not known yet: see dbClock),
// and the owner, which a release granting the lock to the waiter writes
// in the row (an owner may hold "@"; tokens never do, the portable
// layer's are hex). One wait keeps one element through its attempts.
func (d *leases) element(ctx context.Context, req driver.Request) string {
	deadline := ""
	if dl, ok := ctx.Deadline(); ok {
		if off, ok := d.clock.offset(); ok {
			deadline = strconv.FormatInt(dl.UnixMicro()+off, 10)
		}
	}
	return req.Token + "@" + d.wake + "@" + deadline + "@" + req.Owner
}

// dbClock estimates the database clock against this host's: the lowest
// of (database time a statement ran) − (local time it was sent) seen so
// far. A statement runs after it is sent, so each sample is at least the
// true offset, and the lowest is the closest; a deadline mapped with it
// is never earlier than the waiter's own, and later by at most the
// fastest one-way trip seen. A wall clock that steps makes it wrong by
// the step: a waiter that gave up may then be handed the lock (it holds
// it until its clean-up hands it on), or one still waiting be woken to
// take it instead (reserved): both safe.
type dbClock struct {
	mu    sync.Mutex
	known bool
	off   int64 // µs
}

// sample records that a statement sent at sent ran at the database time
// us (µs since the epoch).
func (c *dbClock) sample(sent time.Time, us int64) {
	off := us - sent.UnixMicro()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.known || off < c.off {
		c.known, c.off = true, off
	}
}

// offset returns the estimate, database µs − local µs.
func (c *dbClock) offset() (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off, c.known
}

// handOffWindowGo is handOffWindow: a hand-off's provisional grant.
const handOffWindowGo = time.Second

// isHandOff reports whether a wake channel's payload is a hand-off,
// "TOKEN p FENCE MICROS".
func isHandOff(msg string) bool { return strings.Contains(msg, " p ") }

// handOff reads a hand-off's payload: the lock is this waiter's, fence
// FENCE, granted at the database time MICROS, for handOffWindowGo.
func handOff(msg string, at driver.Turn) (driver.Grant, bool) {
	f := strings.Fields(msg)
	if len(f) != 4 || f[1] != "p" || at.Sent.IsZero() {
		return driver.Grant{}, false
	}
	fence, err1 := strconv.ParseUint(f[2], 10, 64)
	us, err2 := strconv.ParseInt(f[3], 10, 64)
	if err1 != nil || err2 != nil {
		return driver.Grant{}, false
	}
	return driver.Grant{Acquired: true, Fence: fence, Since: at.Since(us), Window: handOffWindowGo}, true
}
