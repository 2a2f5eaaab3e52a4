package pglock_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/pglock"
)

// TestAdvisoryWaitEndsInServer: a bounded advisory wait is ended by the
// server (lock_timeout a little before the deadline), so when Acquire
// returns nothing is left queued for the lock: no request a release could
// grant to a waiter that gave up (it would hold the lock until its
// connection closed). A cancel sent at the deadline, as before, lands
// later. The waiter reports the holder it queued behind.
func TestAdvisoryWaitEndsInServer(t *testing.T) {
	d := newDB(t)
	c := ctx(t)
	holder := d.locker(t, pglock.Config{Mode: pglock.Advisory})
	waiter := d.locker(t, pglock.Config{Mode: pglock.Advisory})
	ls, err := holder.Acquire(c, "bounded-wait", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(c)
	for i := range 5 {
		_, err := waiter.Acquire(c, "bounded-wait", dlock.WithWait(time.Duration(50+50*i)*time.Millisecond))
		var held *dlock.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("bounded wait = %v, want a HeldError", err)
		}
		var queued int
		if err := d.admin.QueryRow(c, `SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`).Scan(&queued); err != nil {
			t.Fatal(err)
		}
		if queued != 0 {
			t.Fatalf("wait %d: %d advisory requests still queued when Acquire returned, want 0", i, queued)
		}
	}
}
