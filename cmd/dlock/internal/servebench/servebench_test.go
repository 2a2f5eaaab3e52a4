package servebench_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/servebench"
	_ "github.com/dlockdev/dlock/filelock"
	_ "github.com/dlockdev/dlock/memlock"
	_ "github.com/dlockdev/dlock/redislock"
)

// TestRunShort runs every phase briefly on mem:// and checks what must
// hold whatever the machine's speed: both sides did their count of
// cycles without failing or breaking exclusion, and every stream got its
// own event and was then closed.
func TestRunShort(t *testing.T) {
	r, err := servebench.Run(context.Background(), servebench.Config{
		URL: "mem://servebench-short", Ops: 200, Goroutines: 4, SSEStreams: 200,
	})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkReport(t, r, 200, 200)
	var out bytes.Buffer
	r.Format(&out)
	t.Logf("\n%s", out.String())
	for _, want := range []string{"uncontended-4", "contended-4", "http", "library", "force-release", "per stream"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("Format output lacks %q", want)
		}
	}
}

// checkReport checks the figures' correctness, not their speed: each
// side did ops operations (any number, when 0: a timed run).
func checkReport(t *testing.T, r servebench.Report, ops, streams int) {
	t.Helper()
	for name, c := range map[string]servebench.Compare{"uncontended": r.Uncontended, "contended": r.Contended} {
		for side, w := range map[string]servebench.Workload{"http": c.HTTP, "library": c.Library} {
			if (ops > 0 && w.Ops != ops) || w.Ops <= 0 || w.Failed != 0 || w.Violations != 0 {
				t.Errorf("%s %s: %d ops (want %d), %d failed (%s), %d violations", name, side, w.Ops, ops, w.Failed, w.Err, w.Violations)
			}
		}
		if c.Ratio <= 0 {
			t.Errorf("%s: ratio %v", name, c.Ratio)
		}
	}
	s := r.Streams
	if s.Streams != streams {
		t.Fatalf("streams %d, want %d", s.Streams, streams)
	}
	for _, d := range []servebench.Delivery{s.Released, s.Lost} {
		if d.Streams != streams/2 || d.Delivered != d.Streams || d.Ended != d.Streams || d.Wrong != 0 {
			t.Errorf("%q: %d streams, %d delivered, %d wrong, %d ended", d.Event, d.Streams, d.Delivered, d.Wrong, d.Ended)
		}
		n := 0
		for _, c := range d.Reasons {
			n += c
		}
		if want := map[string]int{"released": 0, "lost": d.Delivered}[d.Event]; n != want {
			t.Errorf("%q: reasons %v, want %d in all", d.Event, d.Reasons, want)
		}
		if d.P50 <= 0 || d.P99 < d.P50 || d.Max < d.P99 {
			t.Errorf("%q: p50 %s p99 %s max %s", d.Event, d.P50, d.P99, d.Max)
		}
	}
	if s.WithAll.Server <= s.Before.Server || s.WithAll.Client <= s.Before.Client {
		t.Errorf("goroutines did not grow with the streams: before %+v, with all %+v", s.Before, s.WithAll)
	}
}

// TestRunLocker runs on a caller's Locker, without streams, and leaves
// the Locker usable.
func TestRunLocker(t *testing.T) {
	ctx := context.Background()
	l, err := dlock.Open(ctx, "mem://servebench-locker")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	r, err := servebench.Run(ctx, servebench.Config{Locker: l, Ops: 50, Goroutines: 2, SSEStreams: -1})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if r.Backend != "mem" || r.Streams.Streams != 0 || r.Uncontended.HTTP.Ops != 50 {
		t.Errorf("report: backend %q, %d streams, %d HTTP cycles", r.Backend, r.Streams.Streams, r.Uncontended.HTTP.Ops)
	}
	ls, err := l.TryAcquire(ctx, "after-run")
	if err != nil {
		t.Fatalf("the Locker is unusable after Run: %v", err)
	}
	_ = ls.Release(ctx)
}

// TestConfigErrors: bad input is an invalid-argument error naming the
// value, before anything starts.
func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  servebench.Config
		want string
	}{
		{servebench.Config{}, "URL or Locker is required"},
		{servebench.Config{URL: "mem://x", Duration: -time.Second}, "duration -1s"},
		{servebench.Config{URL: "mem://x", Duration: time.Hour}, "duration 1h0m0s"},
		{servebench.Config{URL: "mem://x", Goroutines: 5000}, "goroutines 5000"},
		{servebench.Config{URL: "mem://x", Ops: -1}, "ops -1"},
		{servebench.Config{URL: "mem://x", SSEStreams: -2}, "SSE streams -2"},
		{servebench.Config{URL: "mem://x", SSEStreams: 1_000_000}, "SSE streams 1000000"},
		{servebench.Config{URL: "mem://x", TTL: -time.Second}, "TTL -1s"},
		{servebench.Config{URL: "nope://x"}, "nope"},
	} {
		_, err := servebench.Run(context.Background(), tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Run(%+v) = %v, want an error containing %q", tc.cfg, err, tc.want)
		}
		if tc.cfg.URL == "mem://x" && !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Run(%+v) = %v, want ErrInvalidArgument", tc.cfg, err)
		}
	}
}

// TestRunFull is the full benchmark on DLOCK_SERVEBENCH_URL (skipped
// without it), e.g.
//
//	DLOCK_SERVEBENCH_URL=redis://127.0.0.1:26391 go test -run TestRunFull -v ./internal/servebench
//
// DLOCK_SERVEBENCH_DURATION (default 2s) sets each workload's duration.
func TestRunFull(t *testing.T) {
	url := os.Getenv("DLOCK_SERVEBENCH_URL")
	if url == "" {
		t.Skip("DLOCK_SERVEBENCH_URL is not set")
	}
	d, _ := time.ParseDuration(os.Getenv("DLOCK_SERVEBENCH_DURATION"))
	r, err := servebench.Run(context.Background(), servebench.Config{URL: url, Duration: d})
	var out bytes.Buffer
	r.Format(&out)
	t.Logf("\n%s", out.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkReport(t, r, 0, servebench.DefaultSSEStreams)
}
