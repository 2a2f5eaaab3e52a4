package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/spf13/cobra"
)

// benchOptions configures `dlock bench`.
type benchOptions struct {
	URL string
	// Duration is how long each workload runs (each side, with Compare),
	// or how long the leases are held; 0 means the default.
	Duration time.Duration
	// Ops, when positive, runs each workload for that many operations
	// (each side, with Compare) instead of for Duration.
	Ops  int
	TTL  time.Duration
	JSON bool
	// Compare runs the hand-written baseline beside dlock.
	Compare bool
	// Format is "table" or "markdown" (Compare only).
	Format string
	// SVG, if set, is the file the comparison chart is written to.
	SVG string
	// Leases, if positive, holds that many leases instead.
	Leases int
	// Election measures Rounds leader failovers instead (default 3).
	Election bool
	Rounds   int
	// Semaphore, if positive, measures a semaphore of that many permits
	// instead: Goroutines (default 16) each holding a permit for Hold.
	Semaphore  int
	Goroutines int
	Hold       time.Duration
	// Serve measures the HTTP API (dlock serve) against the library in
	// the same run, with Streams concurrent events streams.
	Serve   bool
	Streams int
	// Exe is the dlock binary that runs the leaders of Election; ""
	// means this executable.
	Exe string
}

// Bounds of --duration and --leases, so that a typo cannot start an
// hour-long run or a million-lease one.
const (
	minBenchDuration     = 100 * time.Millisecond
	maxBenchDuration     = 10 * time.Minute
	defaultBenchDuration = 2 * time.Second
	maxBenchLeases       = 100_000
	maxBenchOps          = 10_000_000
	defaultBenchRounds   = 3
	maxBenchRounds       = 100
	defaultBenchWorkers  = 16
	maxBenchWorkers      = 1024
	maxBenchHold         = time.Second
)

// benchLong is the help of `dlock bench`.
const benchLong = `Run four workloads against the backend, each for --duration (or --ops
operations):

  uncontended-1, -16, -64   1, 16 or 64 goroutines on one Locker, each on its
                            own lock name: TryAcquire then Release, at once
  contended-16              16 goroutines, each with its own Locker, on one
                            name: Acquire (waiting), Release, pause 1 ms

and print ops/s (cycles, or critical sections), p50/p99 of a cycle (or of
the wait for the lock), handoff p50/p99 (from one holder's release to the
next grant), errors, and mutual-exclusion violations (two holders at once:
must be 0). Lock names are unique to the run (dlock-bench/<random>/...).

--compare runs, in the same process and in alternating slices, the code a
competent user would write by hand for the same backend, with the fewest
round trips (scripts loaded once), and prints dlock's ratio to it, the
round trips per cycle of each side (counted by a hook on its client) and
the server's time per cycle where the backend exposes it (the Redis server
process's CPU, pg_stat_statements, etcd's process CPU). Contended, the
baseline waits every way such a user would: polls that sleep 100µs or 1ms
between attempts, and the backend's blocking primitive where it has one;
dlock's ratio is against the best of them (a busy poll is shown for
reference only). The table's legend explains every column.

  redis      one Lua script per acquire (SET NX PX, INCR of the fence when
             taken), one per token-checked release (EVALSHA)
  redlock    parallel SET NX PX on every node, majority wins (redsync)
  postgres   mode=advisory: pg_try_advisory_lock + pg_advisory_unlock;
             contended also blocking pg_advisory_lock. mode=lease (default):
             one-statement upsert lease + token-checked DELETE (creates
             table dlock_bench_lease and sequence dlock_bench_fence)
  mysql      mode=get_lock: GET_LOCK(name, 0) + RELEASE_LOCK on a pinned
             connection; contended also blocking GET_LOCK. mode=lease
             (default): one INSERT ... ON DUPLICATE KEY UPDATE when expired
             + token-checked DELETE; contended also a poll with backoff
             (creates table dlock_bench_lease and sequence
             dlock_bench_fence: MariaDB). Its client interpolates
             parameters (one round trip a statement) unless the URL sets
             interpolateParams; dlock's is as the URL says
  etcd       concurrency.Mutex on one concurrency.Session; contended also
             Mutex.Lock on a Session per waiter. The contended row times one
             etcd Put between its rounds and prints each side's handoff p50
             as a multiple of it (a handoff cannot beat the write that frees
             the lock)
  zk         an ephemeral node created in one multi with the fence's write,
             deleted to release; contended also zk.NewLock on a session per
             waiter
  file       SQLite INSERT OR IGNORE + DELETE on the same file

--leases N takes N leases on one Locker, holds them for --duration (default:
the TTL, three refresh periods) and prints the refreshes the watchdog sent,
the calls (batches) that carried them, the round trips counted meanwhile
(also per watchdog tick, the TTL/3 between refreshes), the client's Go heap
per lease (in use after taking them all minus before, each after a GC;
before is read once each goroutine taking them holds one lease, so that the
connections the client opens for them are not counted), and the leases lost
(must be 0).

--election measures leader failover, --rounds times: a process running
` + "`dlock elect NAME -- sleep`" + ` (this binary) is elected, this process
campaigns behind it, the leader is killed with SIGKILL, and the time from
the kill to the return of the waiting Campaign (the new term) is timed. It
prints min, p50 and max, the TTL (--ttl: each round lasts about one TTL, so
try --ttl 2s) and p50/TTL: expect about 1 on TTL backends (etcd: up to 0.5 s
more), and far less where a lease ends with its session.

--semaphore N runs --goroutines goroutines (default 16), each with its own
Locker, on one semaphore of N permits for --duration: Acquire (waiting),
hold --hold (default 1ms), Release, pause 1 ms; it prints permits granted
per second, the wait p50/p99, and the most holders seen at once (at most N).

--serve starts dlock serve in this process on a loopback port over the backend
and runs the uncontended and contended workloads (--goroutines, --duration)
through its HTTP API and through the library directly, in the same run: cycles/s,
p50/p99, this process's CPU time per cycle (clients, server and driver), the
HTTP/library ratio and the server's overhead per cycle. Then it
opens --streams events streams (default 1000), one per lease, ends the leases
(half released, half force-released) and times each stream's event.`

func newBenchCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &benchOptions{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure a backend, alone or against hand-written code",
		Long:  benchLong,
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.URL = g.URL
			return runBench(cmd.Context(), opts, std)
		},
	}
	addBenchFlags(cmd, opts)
	return cmd
}

// addBenchFlags registers the flags of `dlock bench`.
func addBenchFlags(cmd *cobra.Command, opts *benchOptions) {
	f := cmd.Flags()
	durationVar(f, &opts.Duration, "duration", 0, "how long each workload runs, or the leases are held (100ms to 10m; default 2s, or the TTL with --leases)")
	f.IntVar(&opts.Ops, "ops", 0, "run each workload for this many operations instead of --duration (not with --leases or --election)")
	durationVar(f, &opts.TTL, "ttl", 10*time.Second, "lease TTL used by the workloads")
	f.BoolVar(&opts.JSON, "json", false, "print one JSON record per workload instead of a table")
	f.BoolVar(&opts.Compare, "compare", false, "also run the hand-written baseline for the backend and print dlock's ratio to it")
	f.StringVar(&opts.Format, "format", "table", "with --compare: table or markdown")
	f.StringVar(&opts.SVG, "svg", "", "with --compare: write a bar chart of dlock against the baseline to this file")
	f.IntVar(&opts.Leases, "leases", 0, "hold this many leases on one Locker and count the refresh traffic")
	f.BoolVar(&opts.Election, "election", false, "measure leader failover: SIGKILL a leader running dlock elect, time the next term")
	f.IntVar(&opts.Rounds, "rounds", defaultBenchRounds, "with --election: failovers to measure")
	f.BoolVar(&opts.Serve, "serve", false, "measure the HTTP API (dlock serve) against the library, and --streams events streams")
	f.IntVar(&opts.Streams, "streams", 1000, "with --serve: concurrent events streams (-1: none)")
	f.IntVar(&opts.Semaphore, "semaphore", 0, "measure a semaphore of this many permits under contention")
	f.IntVar(&opts.Goroutines, "goroutines", defaultBenchWorkers, "with --semaphore: goroutines, each with its own Locker")
	durationVar(f, &opts.Hold, "hold", time.Millisecond, "with --semaphore: how long each grant is held")
}

func runBench(ctx context.Context, opts *benchOptions, std *IO) error {
	if err := opts.check(); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	switch {
	case opts.Election:
		return runBenchElection(ctx, opts, std)
	case opts.Semaphore > 0:
		return runBenchSemaphore(ctx, opts, std)
	case opts.Leases > 0:
		return runBenchLeases(ctx, opts, std)
	case opts.Compare:
		return runBenchCompare(ctx, opts, std)
	case opts.Serve:
		return runBenchServe(ctx, opts, std)
	}
	return runBenchAlone(ctx, opts, std)
}

// check validates the options and fills in the default duration.
func (o *benchOptions) check() error {
	if o.Format == "" {
		o.Format = "table"
	}
	o.Rounds = cmp.Or(o.Rounds, defaultBenchRounds)
	o.Goroutines = cmp.Or(o.Goroutines, defaultBenchWorkers)
	if o.Duration == 0 {
		o.Duration = defaultBenchDuration
		if o.Leases > 0 {
			o.Duration = o.TTL
		}
	}
	switch {
	case o.Duration < minBenchDuration || o.Duration > maxBenchDuration:
		return usageErr("--duration %s is outside [%s, %s]", o.Duration, minBenchDuration, maxBenchDuration)
	case o.Ops < 0 || o.Ops > maxBenchOps:
		return usageErr("--ops %d is outside [1, %d]", o.Ops, maxBenchOps)
	case o.Ops > 0 && (o.Leases > 0 || o.Election):
		return usageErr("--ops counts operations of a workload: --leases and --election run for a time (--duration, --rounds)")
	case o.Leases < 0 || o.Leases > maxBenchLeases:
		return usageErr("--leases %d is outside [1, %d]", o.Leases, maxBenchLeases)
	case o.Format != "table" && o.Format != "markdown":
		return usageErr("--format %q: want table or markdown", o.Format)
	case !o.Compare && (o.Format != "table" || o.SVG != ""):
		return usageErr("--format and --svg need --compare")
	case o.modes() > 1:
		return usageErr("--compare, --leases, --election, --semaphore and --serve are separate runs: give one")
	case o.Rounds < 1 || o.Rounds > maxBenchRounds:
		return usageErr("--rounds %d is outside [1, %d]", o.Rounds, maxBenchRounds)
	case o.Semaphore < 0 || o.Semaphore > dlock.MaxPermits:
		return usageErr("--semaphore %d is outside [1, %d]", o.Semaphore, dlock.MaxPermits)
	case o.Goroutines < 1 || o.Goroutines > maxBenchWorkers:
		return usageErr("--goroutines %d is outside [1, %d]", o.Goroutines, maxBenchWorkers)
	case o.Hold < 0 || o.Hold > maxBenchHold:
		return usageErr("--hold %s is outside [0, %s]", o.Hold, maxBenchHold)
	case o.JSON && o.Format == "markdown":
		return usageErr("--json and --format markdown: give one")
	}
	return nil
}

// budget is each workload's budget: --ops operations, or --duration.
func (o *benchOptions) budget() benchwork.Budget {
	if o.Ops > 0 {
		return benchwork.Count(o.Ops)
	}
	return benchwork.For(o.Duration)
}

// modes counts the runs the options ask for besides the default one.
func (o *benchOptions) modes() int {
	n := 0
	for _, on := range []bool{o.Compare, o.Leases > 0, o.Election, o.Semaphore > 0, o.Serve} {
		if on {
			n++
		}
	}
	return n
}

// benchResult is one workload's measurements without a baseline; `bench
// --json` prints one per line.
type benchResult struct {
	Workload     string  `json:"workload"`
	Goroutines   int     `json:"goroutines"`
	Contended    bool    `json:"contended"`
	Ops          int64   `json:"ops"`
	Seconds      float64 `json:"seconds"`
	OpsPerSec    float64 `json:"ops_per_sec"`
	LatencyP50Ms float64 `json:"latency_p50_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	HandoffP50Ms float64 `json:"handoff_p50_ms,omitempty"`
	HandoffP99Ms float64 `json:"handoff_p99_ms,omitempty"`
	Fairness     float64 `json:"fairness,omitempty"`
	Errors       int64   `json:"errors"`
	Violations   int64   `json:"violations"`
}

// benchWorkloads are the workloads of `dlock bench`, with or without
// --compare.
var benchWorkloads = baseline.Workloads

// runBenchAlone measures dlock on any backend, from its URL alone.
func runBenchAlone(ctx context.Context, opts *benchOptions, std *IO) error {
	l, err := openLocker(ctx, opts.URL)
	if err != nil {
		return err
	}
	l.Close() // the URL works; each workload opens its own lockers
	prefix := "dlock-bench/" + randomHex(4) + "/"
	var results []benchResult
	for _, w := range benchWorkloads {
		r, err := benchAlone(ctx, opts, w, prefix+w.Name+"/")
		if err != nil {
			return err
		}
		if opts.JSON {
			if err := writeJSONLine(std.Out, r); err != nil {
				return err
			}
		}
		results = append(results, r)
	}
	if !opts.JSON {
		return writeBenchTable(std, results)
	}
	return nil
}

// benchAlone runs one workload: one shared Locker for the uncontended
// ones, one Locker per goroutine for the contended one.
func benchAlone(ctx context.Context, opts *benchOptions, w baseline.Workload, prefix string) (benchResult, error) {
	n := 1
	if w.Contended {
		n = w.Goroutines
	}
	lockers, err := openLockers(ctx, opts, n)
	defer closeAll(lockers)
	if err != nil {
		return benchResult{}, err
	}
	r := benchResult{Workload: w.Name, Goroutines: w.Goroutines, Contended: w.Contended}
	if w.Contended {
		lock := benchwork.Acquire(lockers, prefix+"shared", dlock.WithWait(dlock.Forever))
		c := benchwork.RunContended(ctx, opts.budget(), benchwork.Contend{Workers: w.Goroutines, OnError: benchwork.GoOn}, lock)
		r.fromContention(c)
	} else {
		c := benchwork.RunCycles(ctx, opts.budget(), w.Goroutines, prefix, benchwork.TryAcquireRelease(lockers[0]), benchwork.GoOn)
		r.fromCycles(c)
	}
	if err := ctx.Err(); err != nil {
		return benchResult{}, fmt.Errorf("bench interrupted: %w", err)
	}
	return r, nil
}

func (r *benchResult) fromCycles(c benchwork.Cycles) {
	r.Ops, r.Errors, r.Seconds, r.OpsPerSec = int64(len(c.Latencies)), int64(c.Failed), c.Elapsed.Seconds(), c.Rate()
	r.LatencyP50Ms, r.LatencyP99Ms = msOf(benchwork.Percentile(c.Latencies, 50)), msOf(benchwork.Percentile(c.Latencies, 99))
}

func (r *benchResult) fromContention(c *benchwork.Contention) {
	r.Ops, r.Errors, r.Seconds, r.OpsPerSec = int64(len(c.Waits)), int64(c.Failed), c.Elapsed.Seconds(), c.Rate()
	r.LatencyP50Ms, r.LatencyP99Ms = msOf(benchwork.Percentile(c.Waits, 50)), msOf(benchwork.Percentile(c.Waits, 99))
	r.HandoffP50Ms, r.HandoffP99Ms = msOf(benchwork.Percentile(c.Handoffs, 50)), msOf(benchwork.Percentile(c.Handoffs, 99))
	r.Fairness, r.Violations = c.Fairness(), int64(c.Violations)
}

func msOf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func writeBenchTable(std *IO, rs []benchResult) error {
	tw := tabwriter.NewWriter(std.Out, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "WORKLOAD\tOPS/S\tP50 MS\tP99 MS\tHANDOFF P50 MS\tHANDOFF P99 MS\tFAIRNESS\tERRORS\tVIOLATIONS\t")
	for _, r := range rs {
		handoff50, handoff99, fair := "-", "-", "-"
		if r.Contended {
			handoff50, handoff99 = fmt.Sprintf("%.2f", r.HandoffP50Ms), fmt.Sprintf("%.2f", r.HandoffP99Ms)
			fair = fmt.Sprintf("%.2f", r.Fairness)
		}
		fmt.Fprintf(tw, "%s\t%.0f\t%.2f\t%.2f\t%s\t%s\t%s\t%d\t%d\t\n", r.Workload, r.OpsPerSec,
			r.LatencyP50Ms, r.LatencyP99Ms, handoff50, handoff99, fair, r.Errors, r.Violations)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(std.Out, "P50/P99: one TryAcquire+Release cycle (uncontended) or the wait for the lock (contended).")
	return nil
}

// runBenchCompare measures dlock and the hand-written baseline.
func runBenchCompare(ctx context.Context, opts *benchOptions, std *IO) error {
	t, err := openTarget(ctx, opts.URL, opts.TTL)
	if err != nil {
		return err
	}
	defer t.Close()
	cfg := baseline.Config{Duration: opts.Duration, Ops: opts.Ops, Prefix: "dlock-bench/" + randomHex(4) + "/"}
	var each func(baseline.Comparison)
	if opts.JSON {
		each = func(c baseline.Comparison) { _ = writeJSONLine(std.Out, c) }
	}
	cs, err := baseline.Compare(ctx, t, cfg, each)
	if err != nil {
		return err
	}
	if opts.SVG != "" {
		if err := writeSVGFile(opts.SVG, cs); err != nil {
			return err
		}
	}
	switch {
	case opts.JSON:
		return nil
	case opts.Format == "markdown":
		return benchreport.WriteMarkdown(std.Out, cs)
	}
	return benchreport.WriteTable(std.Out, cs)
}

// openTarget sets up the comparison for url ("" means $DLOCK_URL, then
// the embedded default), bounding the connection attempt.
func openTarget(ctx context.Context, url string, ttl time.Duration) (*baseline.Target, error) {
	if url == "" {
		url = os.Getenv(dlock.EnvURL)
	}
	if url == "" {
		def, err := dlock.DefaultURL()
		if err != nil {
			return nil, err
		}
		url = def
	}
	octx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	t, err := baseline.Open(octx, url, ttl)
	return t, explainTimeout(octx, err)
}

func writeSVGFile(path string, cs []baseline.Comparison) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := benchreport.WriteSVG(f, cs, "dlock vs hand-written baseline"); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// runBenchLeases holds opts.Leases leases and reports the refresh cost.
func runBenchLeases(ctx context.Context, opts *benchOptions, std *IO) error {
	t, err := openTarget(ctx, opts.URL, opts.TTL)
	if err != nil {
		return err
	}
	defer t.Close()
	r, err := baseline.HoldLeases(ctx, t, opts.Leases, opts.Duration, opts.TTL, "dlock-bench/"+randomHex(4)+"/lease/")
	if err != nil {
		return err
	}
	if opts.JSON {
		err = writeJSONLine(std.Out, r)
	} else {
		err = benchreport.WriteLeases(std.Out, []baseline.LeaseReport{r})
	}
	if err != nil {
		return err
	}
	if r.Lost > 0 {
		return fmt.Errorf("%d of %d leases were lost while held", r.Lost, r.Leases)
	}
	return nil
}

func writeJSONLine(w io.Writer, v any) error { return json.NewEncoder(w).Encode(v) }

// randomHex is n random bytes in hex, for names unique to a run.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
