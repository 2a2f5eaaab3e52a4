package dlocktest

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// testElection: one leader at a time; Leader and Observe report it and its
// value; resigning elects the next campaigner with a higher term; a
// force-released term is lost (Done closes).
func (s *suite) testElection(t *testing.T) {
	s.needLister(t)
	name := s.name(t)
	ctx := s.ctx(t)
	ea, err := s.locker(t).Election(name, s.opts()...)
	if err != nil {
		t.Fatal(err)
	}
	lb := s.locker(t)
	eb, _ := lb.Election(name, s.opts()...)
	octx, stop := context.WithCancel(ctx)
	defer stop()
	seen := eb.Observe(octx)
	if h := <-seen; h.Fence != 0 {
		t.Errorf("Observe before any campaign: %+v, want no leader (fence 0)", h)
	}
	a := s.firstLeader(t, ctx, ea, eb, seen)
	b := s.nextLeaderOnResign(t, ctx, eb, a, seen)
	if !s.provides(ForceReleaser) {
		release(t, b)
		return
	}
	if _, ok, fence, err := ea.ForceRelease(ctx); err != nil || !ok || fence <= b.Fence() {
		t.Fatalf("ForceRelease = %v, %d, %v; want the leader evicted and a higher fence", ok, fence, err)
	}
	if bound := s.ttl/3 + s.slack(); !done(t, b, bound) {
		t.Fatalf("force-released term's Done not closed within %s", bound)
	}
}

// firstLeader has ea campaign with the value http://a:1 and win: a
// leader's term, reported by eb's Observe (seen) and Leader; eb's own
// campaign then does not win within half a TTL.
func (s *suite) firstLeader(t *testing.T, ctx context.Context, ea, eb *dlock.Election, seen <-chan dlock.Holder) *dlock.Lease {
	a, err := ea.Campaign(ctx, "http://a:1")
	if err != nil {
		t.Fatalf("first Campaign: %v", err)
	}
	if a.Kind() != dlock.KindLeader {
		t.Errorf("term kind %s, want leader", a.Kind())
	}
	expectLeader(t, seen, "http://a:1", a.Fence(), s.slack())
	if h, ok, err := eb.Leader(ctx); err != nil || !ok || h.Owner != "http://a:1" || h.Fence != a.Fence() {
		t.Errorf("Leader = %+v, %v, %v; want a's value and term %d", h, ok, err, a.Fence())
	}
	if _, err := eb.Campaign(ctx, "http://b:1", dlock.WithWait(s.ttl/2)); err == nil {
		t.Fatal("second Campaign won while the first leader leads")
	}
	return a
}

// nextLeaderOnResign has eb campaign with the value http://b:1 while a
// leads, then a resign: eb wins a higher term, which Observe reports.
func (s *suite) nextLeaderOnResign(t *testing.T, ctx context.Context, eb *dlock.Election, a *dlock.Lease, seen <-chan dlock.Holder) *dlock.Lease {
	var b *dlock.Lease
	var berr error
	won := make(chan time.Time, 1)
	go func() {
		b, berr = eb.Campaign(ctx, "http://b:1")
		won <- time.Now()
	}()
	time.Sleep(s.ttl / 2)
	resigned := time.Now()
	release(t, a)
	at := <-won
	if berr != nil {
		t.Fatalf("second Campaign after the leader resigned: %v", berr)
	}
	t.Logf("next leader elected %s after the resignation", at.Sub(resigned))
	if b.Fence() <= a.Fence() {
		t.Errorf("term %d after term %d, want strictly increasing", b.Fence(), a.Fence())
	}
	expectLeader(t, seen, "http://b:1", b.Fence(), s.slack())
	return b
}

// expectLeader reads Observe until it reports the leader with value and
// term, failing t after within.
func expectLeader(t *testing.T, seen <-chan dlock.Holder, value string, term uint64, within time.Duration) {
	t.Helper()
	timeout := time.After(within)
	for {
		select {
		case h := <-seen:
			if h.Owner == value && h.Fence == term {
				return
			}
		case <-timeout:
			t.Errorf("Observe did not report leader %q, term %d, within %s", value, term, within)
			return
		}
	}
}

// testElectionCrash SIGKILLs a child that leads: a campaigner is elected
// within the TTL plus a margin, with a higher term.
func (s *suite) testElectionCrash(t *testing.T) {
	s.needLister(t)
	s.needProcesses(t)
	name := s.name(t)
	c := s.startChild(t, childSpec{Role: roleLeader, Names: []string{name}})
	line := c.line(t, time.Minute)
	if !strings.HasPrefix(line, "held ") {
		t.Fatalf("child said %q, want \"held TERM\"; stderr:\n%s", line, c.stderr.String())
	}
	el, _ := s.locker(t).Election(name, s.opts()...)
	c.kill()
	killed := time.Now()
	bound := s.ttl + s.slack()
	ls, err := el.Campaign(s.ctx(t), "next", dlock.WithWait(bound))
	if err != nil {
		t.Fatalf("no leader %s after the leader was SIGKILLed (TTL %s): %v", time.Since(killed), s.ttl, err)
	}
	t.Logf("new term %d began %s after SIGKILL of the leader (%s; TTL %s)", ls.Fence(), time.Since(killed), line, s.ttl)
	if old, err := strconv.ParseUint(strings.TrimPrefix(line, "held "), 10, 64); err != nil || ls.Fence() <= old {
		t.Errorf("new term %d not above the crashed leader's (%s)", ls.Fence(), line)
	}
	release(t, ls)
}
