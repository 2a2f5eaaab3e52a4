package mysqllock_test

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/mysqllock"
)

// TestGetLockForceReleaseFreesTheLock: once ForceRelease returns, the
// lock is free for the next attempt, although KILL CONNECTION only tells
// the holder's connection, whose locks the server frees a moment later.
func TestGetLockForceReleaseFreesTheLock(t *testing.T) {
	d := newDB(t)
	cfg := mysqllock.Config{Mode: mysqllock.GetLock}
	holder, admin, taker := d.locker(t, cfg), d.locker(t, cfg), d.locker(t, cfg)
	const name = "force/frees"
	for round := range 30 {
		lease, err := holder.TryAcquire(ctx(t), name, dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if _, _, _, err := admin.ForceRelease(ctx(t), name); err != nil {
			t.Fatalf("round %d: ForceRelease: %v", round, err)
		}
		got, err := taker.TryAcquire(ctx(t), name, dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatalf("round %d: TryAcquire right after ForceRelease: %v", round, err)
		}
		<-lease.Done()
		if err := got.Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
}
