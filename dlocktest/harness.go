// Package dlocktest is the conformance suite every dlock driver runs
// against a real backend: Run(t, harness).
//
// A driver's test package calls Run with a Harness that opens Lockers on a
// server started by internal/testing/testserver, and routes TestMain through Main
// so the suite can start separate OS processes (the test binary re-executed
// as a child) for its cross-process tests:
//
//	func TestMain(m *testing.M) { dlocktest.Main(m) }
//
//	func TestConformance(t *testing.T) {
//		srv := testserver.Redis(t)
//		dlocktest.Run(t, dlocktest.Harness{ ... })
//	}
package dlocktest

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// Harness tells the suite how to reach the backend under test.
type Harness struct {
	// New opens a new, independent Locker (its own client/connection) on
	// the backend under test. The suite closes every Locker it opens.
	New func(t testing.TB) *dlock.Locker

	// URL opens the same backend with dlock.Open from a child process (the
	// driver's package must be linked into the test binary). "" skips the
	// cross-process tests.
	URL string

	// TTL is the short lease length the suite uses (default DefaultTTL); it must
	// be at least the backend's minimum (etcd: 2s). The default, 1s, leaves the
	// watchdog a third of a second to confirm a refresh on a loaded machine.
	TTL time.Duration

	// Expire deletes the named lock on the backend from outside, as if its
	// TTL had run out. nil skips the tests that need it.
	Expire func(t testing.TB, name string)

	// Steal makes a foreign token hold the named lock, from outside. nil
	// skips the tests that need it.
	Steal func(t testing.TB, name string)

	// NewStoppable opens a Locker on a SEPARATE server that the suite may
	// stop with stop(); the suite then expects held leases to be lost.
	// nil skips the server-loss test.
	NewStoppable func(t testing.TB) (l *dlock.Locker, stop func())

	// SessionBound is true when leases end with a backend session rather
	// than a TTL (Postgres advisory): the suite then skips expiry-based
	// tests whose premise does not apply and expects loss on session end.
	SessionBound bool

	// Provides and Lacks declare the optional driver interfaces
	// (Capability) the driver implements, and why it lacks each of the
	// others. Every Capability is declared one way or the other: the
	// suite fails when a provided one is missing (a changed signature
	// would otherwise drop the driver back to polling, or to
	// ErrUnsupported, with every test of it skipped and the suite green),
	// and skips a test only for what is declared lacking, with the reason.
	Provides []Capability
	Lacks    map[Capability]string

	// Skip names behaviours (the suite's top-level subtests, as
	// "RunOnce") not to run, each with why. A driver that runs the suite
	// a second time on another code path (a mode, a kind of pool) skips
	// there what does not take that path; the reason is in the test log.
	// A name the suite does not have, or one without a reason, fails the
	// run.
	Skip map[string]string
}
