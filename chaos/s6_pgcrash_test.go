package chaos

import (
	"fmt"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestS6PostgresCrash: the server is SIGKILLed (postmaster and backends)
// right after a grant and restarted. The holder must be told, nobody may
// be granted while it still believes it holds, and the next fence must be
// above the crashed grant's. The negative control runs the same with
// synchronous_commit=off, where the grant's commit (and its fence bump)
// may not survive the crash: the fence is reused. The control is a race
// with the WAL writer (an idle one is woken by the asynchronous commit and
// may flush it before the kill lands), so it runs up to controlRetries
// more trials until it reproduces.
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
				crash := func() { srv.Crash(); srv.Restart(t) }
				s6Case(t, b, crash, s6Labels{"Postgres", "synchronous_commit=off"}, async)
			})
		}
	}
}

// controlRetries is how many trials a racy negative control may add
// until it reproduces its violation once.
const controlRetries = 5

// s6Labels name, in a row's scenario, the server crashed and the unsafe
// setting of the control.
type s6Labels struct{ server, unsafe string }

// s6Case runs crash right after each grant on b; async is the negative
// control, with a commit that may not survive the crash.
func s6Case(t *testing.T, b backend, crash func(), l s6Labels, async bool) {
	row := Row{Scenario: "S6 " + l.server + " SIGKILL+restart after a grant (fence back, overlap, untold)", Backend: b.Name,
		Expect: ExpectSafe, Metric: "kill→holder told"}
	if async {
		row.Scenario = "S6 " + l.server + " SIGKILL+restart, " + l.unsafe + " control (fence reused)"
		row.Expect = ExpectViolation
	}
	a := openLocker(t, b, dlock.WithTTL(b.TTL))
	next := openLocker(t, b, dlock.WithTTL(b.TTL))
	var back, overlap, kept int
	n := trials(1)
	for i := 0; i < n || (async && row.Violations == 0 && i < n+controlRetries); i++ {
		r := holdThroughFault(t, a, next, lockName("s6", i), crash, 3*b.TTL)
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
