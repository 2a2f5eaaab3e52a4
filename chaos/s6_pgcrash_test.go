package chaos

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testserver"
)

// TestS6PostgresCrash: the server is SIGKILLed (postmaster and backends)
// right after a grant and restarted. The holder must be told, nobody may
// be granted while it still believes it holds, and the next fence must be
// above the crashed grant's. The negative control runs the same with
// synchronous_commit=off, where the grant's commit (and its fence bump)
// may not survive the crash: the fence is reused.
func TestS6PostgresCrash(t *testing.T) {
	srv := testserver.NewPostgres(t)
	for _, mode := range []string{"lease", "advisory"} {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", mode, async), func(t *testing.T) {
				b := pgBackend(t, srv, mode)
				if async {
					// A server parameter in the URL: pgx sends it at
					// connection start-up, so only the lock's sessions
					// commit asynchronously (the schema is already safe).
					b.URL += "&synchronous_commit=off"
				}
				s6Case(t, srv, b, async)
			})
		}
	}
}

func s6Case(t *testing.T, srv *testserver.PostgresServer, b backend, async bool) {
	row := Row{Scenario: "S6 Postgres SIGKILL+restart after a grant (fence back, overlap, untold)", Backend: b.Name,
		Expect: ExpectSafe, Metric: "kill→holder told"}
	if async {
		row.Scenario = "S6 Postgres SIGKILL+restart, synchronous_commit=off control (fence reused)"
		row.Expect = ExpectViolation
	}
	a := openLocker(t, b, dlock.WithTTL(b.TTL))
	next := openLocker(t, b, dlock.WithTTL(b.TTL))
	var back, overlap, kept int
	for i := range trials(1) {
		r := s6Trial(t, srv, a, next, i)
		row.Trials++
		if r.fenceBack {
			back++
		}
		if r.overlap {
			overlap++
		}
		if r.kept {
			kept++
		}
		// The control is judged on what synchronous_commit=off breaks: the
		// fence. Overlaps and untold holders count against every row.
		if r.fenceBack || (!async && r.overlap) {
			row.Violations++
		}
		if r.lin != nil {
			row.Unlinearizable++
			t.Logf("trial %d: %v", i, r.lin)
		}
		if !r.kept {
			row.Timings = append(row.Timings, r.told)
		}
	}
	row.Note = fmt.Sprintf("fence not above: %d, overlap: %d, holder kept the lock: %d", back, overlap, kept)
	report(t, row)
}

type s6Result struct {
	fenceBack, overlap, untold, kept bool
	told                             time.Duration
	lin                              error
}

// s6Trial crashes the server right after a grant, restarts it, and lets a
// second Locker acquire. A holder whose watchdog re-confirms its lease
// after the restart keeps the lock (legal); it then releases after 3 TTLs.
func s6Trial(t *testing.T, srv *testserver.PostgresServer, a, next *dlock.Locker, trial int) s6Result {
	ctx := context.Background()
	name := lockName("s6", trial)
	var h History
	call := time.Now()
	ls, err := a.Acquire(ctx, name, dlock.WithWait(20*time.Second))
	if err != nil {
		t.Fatalf("holder: %v", err)
	}
	h.Grant(1, ls.Fence(), call, time.Now())
	killed := time.Now()
	srv.Crash()
	srv.Restart(t)

	type grant struct {
		ls       *dlock.Lease
		call, at time.Time
		aHeld    bool
		err      error
	}
	var releasing atomic.Bool
	got := make(chan grant, 1)
	go func() {
		g := grant{call: time.Now()}
		g.ls, g.err = next.Acquire(ctx, name, dlock.WithWait(20*time.Second))
		g.at = time.Now()
		g.aHeld = ls.Err() == nil && !releasing.Load()
		got <- g
	}()
	var r s6Result
	select {
	case <-ls.Done():
		at := time.Now()
		h.End(1, at, at)
		r.told = at.Sub(killed)
	case <-time.After(3 * ttlOf(ls)):
		r.kept = true
		releasing.Store(true)
		rc := time.Now()
		_ = ls.Release(ctx)
		h.End(1, rc, time.Now())
	}
	g := <-got
	if g.err != nil {
		t.Fatalf("next holder: %v", g.err)
	}
	h.Grant(2, g.ls.Fence(), g.call, g.at)
	rc := time.Now()
	_ = g.ls.Release(ctx)
	h.End(2, rc, time.Now())
	_ = ls.Release(ctx)
	r.fenceBack = g.ls.Fence() <= ls.Fence()
	r.overlap = g.aHeld
	r.lin = h.Check()
	return r
}

func ttlOf(ls *dlock.Lease) time.Duration { return ls.TTL() }
