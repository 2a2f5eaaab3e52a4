package filelock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// Shape of BenchmarkContendedProcesses: 16 waiters in 4 OS processes.
const (
	benchProcs         = 4
	benchProcGoroutine = 4
)

// BenchmarkContendedProcesses: the contended benchmark across real OS
// processes (the test binary re-executed), as the dlock CLI would contend:
// 4 processes × 4 goroutines on one name, 1 ms pause after each release.
// Each child prints its critical sections' wall-clock intervals (one host,
// one clock) and the parent merges them: cs/s over the span of all
// intervals, handoff = one release to the next grant in any process, fair
// = fewest critical sections of a process / most.
func BenchmarkContendedProcesses(b *testing.B) {
	url := "file://" + filepath.Join(b.TempDir(), "procs.db")
	per := max(b.N/benchProcs, 1)
	var mu sync.Mutex
	var spans []span
	var wg sync.WaitGroup
	for p := range benchProcs {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), fmt.Sprintf("%s=contend %s %d", envChild, url, per))
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			b.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			lines := bufio.NewScanner(out)
			for lines.Scan() {
				var a, r int64
				if _, err := fmt.Sscan(lines.Text(), &a, &r); err == nil {
					mu.Lock()
					spans = append(spans, span{a, r, p})
					mu.Unlock()
				}
			}
			if err := cmd.Wait(); err != nil {
				b.Errorf("child %d: %v", p, err)
			}
		})
	}
	wg.Wait()
	reportSpans(b, spans)
}

// span is one critical section: acquired and releasing (Unix ns), process.
type span struct {
	acq, rel int64
	proc     int
}

func reportSpans(b *testing.B, spans []span) {
	if len(spans) < 2 {
		b.Fatal("no critical sections reported")
	}
	slices.SortFunc(spans, func(x, y span) int { return int(x.acq - y.acq) })
	gaps := make([]time.Duration, 0, len(spans)-1)
	for i := 1; i < len(spans); i++ {
		if spans[i].acq < spans[i-1].rel {
			b.Fatalf("critical sections overlap: %v and %v", spans[i-1], spans[i])
		}
		gaps = append(gaps, time.Duration(spans[i].acq-spans[i-1].rel))
	}
	slices.Sort(gaps)
	total := time.Duration(spans[len(spans)-1].rel - spans[0].acq)
	q := func(p float64) float64 { return float64(gaps[int(p*float64(len(gaps)-1))].Microseconds()) / 1000 }
	b.ReportMetric(float64(len(spans))/total.Seconds(), "cs/s")
	b.ReportMetric(q(0.50), "handoff-p50-ms")
	b.ReportMetric(q(0.99), "handoff-p99-ms")
	b.ReportMetric(fairness(spans), "fair-min/max")
}

// fairness compares the processes' shares while all of them were still
// running (each has a fixed quota, so whole-run counts are always equal).
func fairness(spans []span) float64 {
	last := make([]int64, benchProcs)
	for _, s := range spans {
		last[s.proc] = max(last[s.proc], s.rel)
	}
	end := slices.Min(last)
	counts := make([]int, benchProcs)
	for _, s := range spans {
		if s.rel <= end {
			counts[s.proc]++
		}
	}
	return float64(slices.Min(counts)) / float64(max(slices.Max(counts), 1))
}

// contenderMain is one process of BenchmarkContendedProcesses: n critical
// sections over its goroutines, each printed as "acquiredNs releasingNs".
func contenderMain(url, n string) int {
	total, _ := strconv.Atoi(n)
	ctx := context.Background()
	l, err := dlock.Open(ctx, url, dlock.WithWait(time.Minute))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer l.Close()
	var next atomic.Int64
	var out sync.Mutex
	var lines strings.Builder
	var failed atomic.Bool
	var wg sync.WaitGroup
	for range benchProcGoroutine {
		wg.Go(func() {
			for next.Add(1) <= int64(total) {
				ls, err := l.Acquire(ctx, "contended")
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Store(true)
					return
				}
				a, r := time.Now().UnixNano(), time.Now().UnixNano()
				if err := ls.Release(ctx); err != nil {
					fmt.Fprintln(os.Stderr, err)
					failed.Store(true)
				}
				out.Lock()
				fmt.Fprintf(&lines, "%d %d\n", a, r)
				out.Unlock()
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	fmt.Print(lines.String())
	if failed.Load() {
		return 1
	}
	return 0
}
