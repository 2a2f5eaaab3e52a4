package dlocktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// DefaultTTL is the lease length the suite uses when Harness.TTL is zero.
const DefaultTTL = time.Second

// suite is one run of the conformance tests against one Harness.
type suite struct {
	h     Harness
	ttl   time.Duration
	runID string
}

// Run runs the conformance suite against the backend h describes, one
// subtest per behaviour, in a fixed order: argument validation; a lease's
// life, release with a canceled context, Close releasing; mutual exclusion
// among 32 goroutines and among 4 OS processes (non-atomic
// read-modify-writes of a shared counter, exact final count);
// token-checked release and refresh after expiry, deletion and takeover;
// fences strictly increasing across release, expiry, takeover and
// force-release; bounded and canceled waits (ErrNotAcquired with the
// holder's owner and fence); waking a waiter on release; the watchdog
// keeping a lease past 3 TTLs; loss detection (lock deleted, taken over,
// server stopped: Done, Err, Context's cause); recovery from a SIGKILLed
// holder; AcquireAll in opposite orders from goroutines and processes;
// Inspect, List and ForceRelease where the driver has them; and, where the
// driver can list holders, the primitives built on the mutex: a semaphore
// (at most N holders among 12 goroutines, fences increasing per permit,
// kinds never mixed, a waiter woken by a release, a force-released permit
// lost, a SIGKILLed holder's permit back within the TTL, FIFO waiters on
// queueing backends), a read-write lock (readers share, writers preferred
// and exclusive, one fence order for both, a force-released writer lost)
// and an election (one leader, Leader and Observe, increasing terms, a
// force-released term lost, a SIGKILLed leader replaced within the TTL);
// and, where the driver keeps a run ledger, RunOnce (one run of a slot
// among 8 Lockers, a crashed run reported and run again only when asked,
// also after a SIGKILL, once per slot among 5 processes with skewed
// clocks) and the ledger's own rules (writes under an older fence
// refused, fences compared as numbers past 2^53, a rerun replacing only a
// run without an outcome, the newest slots kept); and, where the driver
// adopts leases, a lease resumed from its handle by another Locker (kept
// after its granting Locker stopped refreshing and closed, after Detach,
// and after its granting process was SIGKILLed, with the same fence; a
// mutex, a permit, read and write grants and a term; a handle of a
// released, expired or taken-over lease refused with ErrLost).
//
// The harness declares which optional driver interfaces the driver
// implements and why it lacks the others; the first subtest checks that
// declaration against the driver. Tests whose premise the backend does
// not meet (no URL for child processes, no Expire/Steal/NewStoppable
// hooks, a session-bound backend for TTL expiry, an interface declared
// lacking) are skipped with the reason.
// Timing bounds are generous: the suite checks behaviour, never speed.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("dlocktest: Harness.New is nil")
	}
	s := &suite{h: h, ttl: h.TTL, runID: randomID()}
	if s.ttl == 0 {
		s.ttl = DefaultTTL
	}
	tests := s.tests()
	if err := checkSkips(h.Skip, tests); err != nil {
		t.Fatal(err)
	}
	for _, tc := range tests {
		if why, ok := h.Skip[tc.name]; ok {
			t.Run(tc.name, func(t *testing.T) { t.Skip(why) })
			continue
		}
		t.Run(tc.name, tc.fn)
	}
}

// checkSkips refuses a skipped name the suite does not have, or one
// skipped without a reason.
func checkSkips(skip map[string]string, tests []subtest) error {
	for name, why := range skip {
		known := slices.ContainsFunc(tests, func(tc subtest) bool { return tc.name == name })
		switch {
		case !known:
			return fmt.Errorf("dlocktest: Harness.Skip names %q, which the suite does not have", name)
		case why == "":
			return fmt.Errorf("dlocktest: Harness.Skip[%q] gives no reason", name)
		}
	}
	return nil
}

type subtest struct {
	name string
	fn   func(t *testing.T)
}

// tests lists the behaviours in the order they run.
func (s *suite) tests() []subtest {
	return []subtest{
		{"Capabilities", s.testCapabilities},
		{"InvalidArguments", s.testInvalidArguments},
		{"AcquireRelease", s.testAcquireRelease},
		{"ReleaseCanceledContext", s.testReleaseCanceledContext},
		{"CloseReleases", s.testCloseReleases},
		{"ExclusionGoroutines", s.testExclusionGoroutines},
		{"ExclusionProcesses", s.testExclusionProcesses},
		{"TokenCheckedRelease", s.testTokenCheckedRelease},
		{"RefreshNeverRecreates", s.testRefreshNeverRecreates},
		{"FencesIncrease", s.testFencesIncrease},
		{"BoundedWait", s.testBoundedWait},
		{"CancelWait", s.testCancelWait},
		{"WakeUp", s.testWakeUp},
		{"Watchdog", s.testWatchdog},
		{"ManualRefresh", s.testManualRefresh},
		{"LossExpired", s.testLossExpired},
		{"LossTakenOver", s.testLossTakenOver},
		{"LossServerStopped", s.testLossServerStopped},
		{"OrphanRecovery", s.testOrphanRecovery},
		{"AcquireAllGoroutines", s.testAcquireAllGoroutines},
		{"AcquireAllProcesses", s.testAcquireAllProcesses},
		{"Admin", s.testAdmin},
		{"SemaphoreLimit", s.testSemaphoreLimit},
		{"SemaphoreKinds", s.testSemaphoreKinds},
		{"SemaphoreWake", s.testSemaphoreWake},
		{"SemaphoreLoss", s.testSemaphoreLoss},
		{"SemaphoreCrash", s.testSemaphoreCrash},
		{"SemaphoreFIFO", s.testSemaphoreFIFO},
		{"RWMutexPreference", s.testRWMutexPreference},
		{"RWMutexExclusion", s.testRWMutexExclusion},
		{"RWMutexLoss", s.testRWMutexLoss},
		{"Election", s.testElection},
		{"ElectionCrash", s.testElectionCrash},
		{"RunOnce", s.testRunOnce},
		{"AdoptSurvivesGrantor", s.testAdoptSurvivesGrantor},
		{"AdoptDetach", s.testAdoptDetach},
		{"AdoptRefused", s.testAdoptRefused},
		{"AdoptKinds", s.testAdoptKinds},
		{"AdoptFromKilledProcess", s.testAdoptFromKilledProcess},
	}
}

func randomID() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// name returns a lock name unique to this run and subtest.
func (s *suite) name(t testing.TB, suffix ...string) string {
	n := "dlocktest/" + s.runID + "/" + strings.TrimPrefix(t.Name(), "Test")
	for _, x := range suffix {
		n += "/" + x
	}
	return n
}

// locker opens a Locker from the harness and closes it when t ends.
func (s *suite) locker(t testing.TB) *dlock.Locker {
	t.Helper()
	l := s.h.New(t)
	if l == nil {
		t.Fatal("dlocktest: Harness.New returned nil")
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Logf("close locker: %v", err)
		}
	})
	return l
}

// ctx is a context that bounds a whole subtest, so nothing hangs forever.
func (s *suite) ctx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute+20*s.ttl)
	t.Cleanup(cancel)
	return ctx
}

// opts are the suite's acquire options: the harness TTL plus extra.
func (s *suite) opts(extra ...dlock.Option) []dlock.Option {
	return append([]dlock.Option{dlock.WithTTL(s.ttl), dlock.WithOwner("dlocktest/" + s.runID)}, extra...)
}

// slack is the generous margin added to every timing bound: the suite runs
// on loaded CI machines and checks behaviour, not speed.
func (s *suite) slack() time.Duration { return time.Second + s.ttl/2 }

// acquire takes name or fails t.
func (s *suite) acquire(t testing.TB, l *dlock.Locker, name string, extra ...dlock.Option) *dlock.Lease {
	t.Helper()
	ls, err := l.Acquire(s.ctx(t), name, s.opts(extra...)...)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", name, err)
	}
	return ls
}

// release releases ls and expects success.
func release(t testing.TB, ls *dlock.Lease) {
	t.Helper()
	if err := ls.Release(context.Background()); err != nil {
		t.Errorf("Release(%q): %v", ls.Name(), err)
	}
}

// waitDone waits up to within for ls.Done and returns how long it took.
func waitDone(t testing.TB, ls *dlock.Lease, within time.Duration) (time.Duration, bool) {
	t.Helper()
	start := time.Now()
	select {
	case <-ls.Done():
		return time.Since(start), true
	case <-time.After(within):
		return within, false
	}
}

// done reports whether ls.Done closes within d.
func done(t testing.TB, ls *dlock.Lease, d time.Duration) bool {
	_, ok := waitDone(t, ls, d)
	return ok
}

// expectHeldElsewhere checks that a fresh Locker cannot take name now.
func (s *suite) expectHeldElsewhere(t testing.TB, name string) {
	t.Helper()
	ls, err := s.locker(t).TryAcquire(s.ctx(t), name, s.opts()...)
	if err == nil {
		release(t, ls)
		t.Fatalf("TryAcquire(%q) succeeded while the lock should be held", name)
	}
	if !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire(%q) = %v, want ErrNotAcquired", name, err)
	}
}

// needProcesses skips t unless the harness can run child processes.
func (s *suite) needProcesses(t *testing.T) {
	t.Helper()
	if s.h.URL == "" {
		t.Skip("Harness.URL is empty: cross-process tests need a URL a child process can open")
	}
	if !mainCalled {
		t.Fatal("cross-process tests need the test package's TestMain to call dlocktest.Main(m)")
	}
}

// needExpiry skips t when leases do not expire by TTL on this backend.
func (s *suite) needExpiry(t *testing.T) {
	t.Helper()
	if s.h.SessionBound {
		t.Skip("session-bound backend: leases end with the session, not by TTL")
	}
}
