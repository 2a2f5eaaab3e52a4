package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// killGrace is the slack S2 allows past the bound: 200 ms.
const killGrace = 200 * time.Millisecond

// TestS2ClientKilledWhileHolding: a holder process is SIGKILLed; the next
// holder must get the lock within TTL + 200 ms (session-bound Postgres
// advisory locks: within 200 ms, as the session ends with the process;
// etcd: within TTL + 500 ms + 200 ms, as etcd itself ends an expired lease
// only at the next 500 ms tick of its lessor; MySQL get_lock mode, whose
// lock is the connection's: within 200 ms), with a higher fence.
func TestS2ClientKilledWhileHolding(t *testing.T) {
	for _, b := range append(allBackends(t), mysqlBackends(t, testserver.MariaDB(t))...) {
		t.Run(b.Name, func(t *testing.T) { s2Case(t, b) })
	}
}

func s2Case(t *testing.T, b backend) {
	bound := b.TTL + b.ExpiryTick + killGrace
	if b.Session {
		bound = killGrace
	}
	row := Row{Scenario: "S2 holder SIGKILLed: next grant within TTL+200ms", Backend: b.Name, Expect: ExpectSafe,
		Metric: "kill→grant", Note: fmt.Sprintf("TTL %s, bound %s", b.TTL, bound)}
	if b.ExpiryTick > 0 {
		row.Note += fmt.Sprintf(" (the server ends expired leases every %s)", b.ExpiryTick)
	}
	if b.Session {
		row.Note = fmt.Sprintf("session-bound, bound %s", bound)
	}
	locker := openLocker(t, b, dlock.WithTTL(b.TTL))
	late := 0
	for i := range trials(1) {
		d, bad, lin := s2Trial(t, b, locker, i)
		row.Trials++
		row.Timings = append(row.Timings, d)
		if d > bound {
			late++
		}
		if bad || d > bound {
			row.Violations++
		}
		if lin != nil {
			row.Unlinearizable++
			t.Logf("trial %d: %v", i, lin)
		}
	}
	if late > 0 {
		row.Note += fmt.Sprintf("; %d late", late)
	}
	report(t, row)
}

// s2Trial kills a holding child and measures when the lock is granted
// again; bad is true when the new fence is not above the killed one's.
func s2Trial(t *testing.T, b backend, locker *dlock.Locker, trial int) (d time.Duration, bad bool, lin error) {
	name := lockName("s2", trial)
	var h History
	a := startChild(t, childSpec{Role: roleHold, URL: b.URL, Name: name, TTL: b.TTL})
	fA, callA, retA, _ := held(t, a.expect("held", time.Minute))
	h.Grant(1, fA, callA, retA)
	// Let the child's watchdog refresh at least once, so that the kill
	// lands mid-lease rather than right after the grant.
	time.Sleep(b.TTL / 2)
	killed := time.Now()
	a.kill() // returns once the child is reaped: it died in between
	h.End(1, killed, time.Now())
	ctx := context.Background()
	call := time.Now()
	ls, err := locker.Acquire(ctx, name, dlock.WithWait(3*b.TTL+10*time.Second))
	granted := time.Now()
	if err != nil {
		t.Fatalf("next holder: %v", err)
	}
	h.Grant(2, ls.Fence(), call, granted)
	rc := time.Now()
	_ = ls.Release(ctx)
	h.End(2, rc, time.Now())
	return granted.Sub(killed), ls.Fence() <= fA, h.Check()
}
