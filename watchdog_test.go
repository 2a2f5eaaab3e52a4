package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/memlock"
)

// TestWatchdogCadence: one lease is refreshed every TTL/3, no more.
func TestWatchdogCadence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newCounting(t, memlock.NewStore())
		l := wrap(t, d)
		defer l.Close()
		const ttl = 3 * time.Second
		ls, err := l.Acquire(t.Context(), "cadence", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		time.Sleep(10*ttl + ttl/6)
		synctest.Wait()
		if err := ls.Err(); err != nil {
			t.Fatalf("lease lost: %v", err)
		}
		times := d.refreshTimes()
		if len(times) != 30 {
			t.Errorf("%d refreshes in 10 TTLs, want 30 (one per TTL/3)", len(times))
		}
		prev := start
		for i, at := range times {
			if gap := at.Sub(prev); gap != ttl/3 {
				t.Errorf("refresh %d came %s after the previous one, want %s", i, gap, ttl/3)
			}
			prev = at
		}
		if err := ls.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
	})
}

// TestWatchdogTransportFailure: refreshes that fail for a transport reason
// are retried every TTL/12 (not in a hot loop), and the lease is declared
// lost, LostUnconfirmed, with a third of its TTL still left.
func TestWatchdogTransportFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newCounting(t, memlock.NewStore())
		l := wrap(t, d)
		defer l.Close()
		const ttl = 12 * time.Second
		start := time.Now()
		ls, err := l.Acquire(t.Context(), "down", dlock.WithTTL(ttl))
		if err != nil {
			t.Fatal(err)
		}
		d.down.Store(true)
		<-ls.Done()
		lostAfter := time.Since(start)
		if want := ttl - ls.TTL()/100 - 2*time.Millisecond - ttl/3; lostAfter != want {
			t.Errorf("lost after %s, want %s (expiry less drift less TTL/3)", lostAfter, want)
		}
		var le *dlock.LostError
		if !errors.As(ls.Err(), &le) || le.Reason != dlock.LostUnconfirmed || !errors.Is(le, errDown) {
			t.Errorf("Err = %v, want a LostError (%s) wrapping the transport error", ls.Err(), dlock.LostUnconfirmed)
		}
		// From the first refresh at TTL/3 to the loss at about 2TTL/3,
		// retries every TTL/12: about 4 calls.
		if n := d.refreshes.Load(); n < 3 || n > 6 {
			t.Errorf("%d refresh calls while the backend was down, want about 4 (every TTL/12)", n)
		}
	})
}

// TestLocalExpiryWithoutAutoRefresh: a lease without auto-refresh ends at
// Expires exactly, and a refresh in time moves that.
func TestLocalExpiryWithoutAutoRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _ := newMem(t)
		const ttl = time.Second
		ls, err := l.Acquire(t.Context(), "manual", dlock.WithTTL(ttl), dlock.WithAutoRefresh(false))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(ttl / 2)
		if err := ls.Refresh(t.Context(), ttl); err != nil {
			t.Fatal(err)
		}
		refreshed := time.Now()
		<-ls.Done()
		if got, want := time.Since(refreshed), ttl-ttl/100-2*time.Millisecond; got != want {
			t.Errorf("ended %s after the refresh, want %s", got, want)
		}
		if ls.Expires() != refreshed.Add(ttl-ttl/100-2*time.Millisecond) {
			t.Errorf("Expires = %s, want the refresh time plus TTL less drift", ls.Expires())
		}
		var le *dlock.LostError
		if !errors.As(ls.Err(), &le) || le.Reason != dlock.LostUnconfirmed {
			t.Errorf("Err = %v, want LostError(%s)", ls.Err(), dlock.LostUnconfirmed)
		}
		if err := ls.Refresh(t.Context(), ttl); !errors.Is(err, dlock.ErrLost) {
			t.Errorf("Refresh after local expiry = %v, want ErrLost", err)
		}
	})
}

// TestLossNoticedWithinRefreshInterval: a lock deleted or stolen from
// outside is noticed by the next refresh, at most TTL/3 later.
func TestLossNoticedWithinRefreshInterval(t *testing.T) {
	for _, tc := range []struct {
		reason  string
		breakIt func(s *memlock.Store, name string)
	}{
		{dlock.LostExpired, func(s *memlock.Store, name string) { s.Expire(name) }},
		{dlock.LostTakenOver, func(s *memlock.Store, name string) { s.Steal(name, "thief", time.Hour) }},
	} {
		t.Run(tc.reason, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				l, store := newMem(t)
				const ttl = 3 * time.Second
				ls, err := l.Acquire(t.Context(), "victim", dlock.WithTTL(ttl))
				if err != nil {
					t.Fatal(err)
				}
				ctx := ls.Context(context.Background())
				time.Sleep(ttl / 10)
				tc.breakIt(store, "victim")
				broken := time.Now()
				<-ctx.Done()
				if took := time.Since(broken); took > ttl/3 {
					t.Errorf("loss noticed after %s, want within TTL/3 = %s", took, ttl/3)
				}
				var le *dlock.LostError
				if !errors.As(context.Cause(ctx), &le) || le.Reason != tc.reason {
					t.Errorf("Context cause = %v, want LostError(%s)", context.Cause(ctx), tc.reason)
				}
				if err := ls.Release(t.Context()); !errors.Is(err, dlock.ErrLost) {
					t.Errorf("Release after loss = %v, want ErrLost", err)
				}
			})
		})
	}
}

// TestBatchRefresh: many leases of one Locker are refreshed in one call
// per interval when the driver batches.
func TestBatchRefresh(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &batchingDriver{countingDriver: newCounting(t, memlock.NewStore())}
		l := wrap(t, d)
		defer l.Close()
		const ttl, n = 3 * time.Second, 100
		for i := range n {
			if _, err := l.TryAcquire(t.Context(), "batch/"+string(rune('a'+i%26))+time.Duration(i).String(), dlock.WithTTL(ttl)); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(3*ttl + ttl/6)
		synctest.Wait()
		if b, it := d.batches.Load(), d.items.Load(); b != 9 || it != 9*n {
			t.Errorf("%d batch calls refreshing %d leases in 3 TTLs, want 9 calls of %d", b, it, n)
		}
		if r := d.refreshes.Load(); r != 0 {
			t.Errorf("%d single Refresh calls, want 0 (all batched): %v", r, d.refreshTimes())
		}
	})
}

// TestWatchdogVisitsOnlyDueLeases: the watchdog's work at a wake-up
// grows with the leases due then, not with all it keeps. 2,000 leases
// are taken 1 ms apart, so that they come due at 2,000 different times,
// and refreshed for 3 TTLs. Walking every lease at each wake-up, as the
// watchdog once did, is millions of visits; looking only at those due is
// a few per refresh.
func TestWatchdogVisitsOnlyDueLeases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := newCounting(t, memlock.NewStore())
		l := wrap(t, d)
		defer l.Close()
		const ttl, n = 3 * time.Second, 2000
		for i := range n {
			if _, err := l.TryAcquire(t.Context(), fmt.Sprintf("visits/%d", i), dlock.WithTTL(ttl)); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(3 * ttl)
		synctest.Wait()
		refreshes := d.refreshes.Load()
		visits := dlock.WatchdogVisits(l)
		t.Logf("%d refreshes, %d visits", refreshes, visits)
		if refreshes < 3*n {
			t.Fatalf("%d refreshes of %d leases in 3 TTLs, want at least %d", refreshes, n, 3*n)
		}
		if visits > 4*refreshes {
			t.Errorf("the watchdog visited leases %d times for %d refreshes: it walks leases with nothing due", visits, refreshes)
		}
	})
}

// slowBatchingDriver is a batchingDriver whose batched refreshes take
// perItem for each lease they carry.
type slowBatchingDriver struct {
	*batchingDriver
	perItem time.Duration
}

func (d *slowBatchingDriver) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	time.Sleep(time.Duration(len(items)) * d.perItem)
	return d.batchingDriver.RefreshBatch(ctx, items)
}

// TestAcquireWaitsForBehindRefreshes: a Locker whose backend cannot
// refresh as many leases as it is asked to take keeps those it holds
// and slows its acquisitions, instead of taking leases it then loses.
// Refreshes cost 200 µs a lease, at most 4 calls at a time: 20,000 a
// second, or 20,000 leases at TTL 3 s (refreshed every second). 16
// goroutines take a lease every millisecond each for 3 s, 48,000 if
// nothing held them back.
func TestAcquireWaitsForBehindRefreshes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d := &slowBatchingDriver{batchingDriver: &batchingDriver{countingDriver: newCounting(t, memlock.NewStore())}, perItem: 200 * time.Microsecond}
		l := wrap(t, d)
		defer l.Close()
		const ttl = 3 * time.Second
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		var (
			mu     sync.Mutex
			leases []*dlock.Lease
			wg     sync.WaitGroup
		)
		for g := range 16 {
			wg.Go(func() {
				for i := 0; ctx.Err() == nil; i++ {
					ls, err := l.TryAcquire(ctx, fmt.Sprintf("behind/%d/%d", g, i), dlock.WithTTL(ttl))
					if err != nil {
						if ctx.Err() == nil {
							t.Errorf("TryAcquire: %v", err)
						}
						return
					}
					mu.Lock()
					leases = append(leases, ls)
					mu.Unlock()
					time.Sleep(time.Millisecond)
				}
			})
		}
		wg.Wait()
		time.Sleep(2 * ttl)
		synctest.Wait()
		lost := 0
		for _, ls := range leases {
			if ls.Err() != nil {
				lost++
			}
		}
		t.Logf("%d leases taken, %d lost, %d refreshes in %d batches", len(leases), lost, d.items.Load(), d.batches.Load())
		if lost > 0 {
			t.Errorf("%d of %d leases lost: the Locker took more leases than it could refresh", lost, len(leases))
		}
	})
}
