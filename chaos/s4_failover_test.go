package chaos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestS4RedisFailover: a Redis primary is killed right after a grant and
// its replica is promoted. On loopback replication beats a kill -9, so the
// window is opened on purpose: the replica is detached (REPLICAOF NO ONE)
// before the grant, which is what a failover manager then promotes.
// (Freezing it with SIGSTOP does not open the window: the kernel buffers
// the replication stream and the resumed replica still applies it.) Without replica_sync the
// promoted replica grants a second holder while the first still believes
// (the negative control; its fence must still be higher). With
// replica_sync=1 the grant is refused and rolled back: 0 double grants.
// The third case detaches the replica after a synced grant, while
// refreshes go on: replica_sync must wait for the replicas on refreshes too.
func TestS4RedisFailover(t *testing.T) {
	cases := []struct {
		name   string
		sync   bool
		late   bool
		expect Expectation
	}{
		{"S4 failover after a grant, no replica_sync control: double grant", false, false, ExpectViolation},
		{"S4 failover after a grant, replica_sync=1: double grant", true, false, ExpectSafe},
		{"S4c failover, replica_sync=1, replica detached after the grant, refreshes go on: double grant", true, true, ExpectSafe},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			row := Row{Scenario: c.name, Backend: "redis primary+replica", Expect: c.expect, Metric: "kill→second grant"}
			var refused, fenceBack int
			for i := range trials(1) {
				r := s4Trial(t, c.sync, c.late, i)
				row.Trials++
				if r.refused {
					refused++
					continue
				}
				if r.double {
					row.Violations++
				}
				if r.fenceBack {
					fenceBack++
				}
				if r.lin != nil {
					row.Unlinearizable++
					t.Logf("trial %d: %v", i, r.lin)
				}
				row.Timings = append(row.Timings, r.next)
			}
			row.Note = fmt.Sprintf("grants refused by replica_sync: %d, fence not above: %d", refused, fenceBack)
			report(t, row)
			if fenceBack > 0 {
				t.Errorf("%d promoted-replica grants had a fence not above the lost grant's", fenceBack)
			}
		})
	}
}

type s4Result struct {
	refused, double, fenceBack bool
	next                       time.Duration
	lin                        error
}

func s4Trial(t *testing.T, sync, late bool, trial int) s4Result {
	ctx := context.Background()
	// Without it the primary waits 5 s for more replicas before a sync.
	p := testserver.Redis(t, "--repl-diskless-sync-delay", "0")
	r := testserver.RedisReplica(t, p)
	defer p.Kill()
	defer r.Kill()
	url := p.URL()
	if sync {
		url += "?replica_sync=1&replica_timeout=1s"
	}
	b := backend{Name: "redis primary", URL: url, TTL: shortTTL}
	a := openLocker(t, b, dlock.WithTTL(b.TTL))
	defer a.Close()
	name := lockName("s4", trial)
	if !late {
		detach(t, r)
	}
	var h History
	stamps := stampEnds(a)
	call := time.Now()
	ls, err := a.TryAcquire(ctx, name)
	ret := time.Now()
	if err != nil {
		if sync {
			return s4Result{refused: true}
		}
		t.Fatalf("grant on the primary: %v", err)
	}
	h.Grant(1, ls.Fence(), call, ret)
	told := stamps.endedAt(ls)
	if late {
		detach(t, r)
		time.Sleep(2 * b.TTL) // refreshes reach the primary only
	}
	killed := time.Now()
	p.Kill()
	nb := backend{Name: "redis promoted replica", URL: r.URL(), TTL: shortTTL}
	next := openLocker(t, nb, dlock.WithTTL(b.TTL))
	defer next.Close()
	call = time.Now()
	nl, err := next.Acquire(ctx, name, dlock.WithWait(3*b.TTL+5*time.Second))
	at := time.Now()
	if err != nil {
		t.Fatalf("second holder on the promoted replica: %v", err)
	}
	double := ls.Err() == nil
	h.Grant(2, nl.Fence(), call, at)
	select {
	case at := <-told:
		h.End(1, at, at)
	case <-time.After(2 * b.TTL):
		t.Errorf("first holder not told within 2 TTLs of its primary's death")
	}
	rc := time.Now()
	_ = nl.Release(ctx)
	h.End(2, rc, time.Now())
	return s4Result{double: double, fenceBack: nl.Fence() <= ls.Fence(), next: at.Sub(killed), lin: h.Check()}
}

// detach cuts the replica off its primary (REPLICAOF NO ONE): from here on
// it is what a failover manager would promote.
func detach(t *testing.T, r *testserver.RedisServer) {
	t.Helper()
	if err := r.Promote(context.Background()); err != nil {
		t.Fatalf("detach replica: %v", err)
	}
}
