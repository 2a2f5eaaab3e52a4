package etcdlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
)

// lockFunc takes one lock (waiting if it must) and returns its release.
type lockFunc func(ctx context.Context) (unlock func(context.Context) error, err error)

// impl builds one goroutine's lockFunc for name; setup (sessions) happens
// here, outside the timed loop.
type impl struct {
	name string
	make func(b *testing.B, name string) lockFunc
}

// impls are dlock's etcd driver and, as the baseline, etcd's own
// concurrency.Mutex (one session, i.e. one lease kept alive by clientv3,
// per goroutine), both on the client cli.
func impls(cli *clientv3.Client, lockers func(b *testing.B) *dlock.Locker) []impl {
	return []impl{
		{"dlock", func(b *testing.B, name string) lockFunc { return dlockLock(lockers(b), name) }},
		{"mutex", func(b *testing.B, name string) lockFunc { return mutexLock(b, cli, name) }},
	}
}

func dlockLock(l *dlock.Locker, name string) lockFunc {
	return func(ctx context.Context) (func(context.Context) error, error) {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(10*time.Second), dlock.WithWait(time.Minute))
		if err != nil {
			return nil, err
		}
		return ls.Release, nil
	}
}

func mutexLock(b *testing.B, cli *clientv3.Client, name string) lockFunc {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	m := concurrency.NewMutex(s, "mutex/"+name)
	return func(ctx context.Context) (func(context.Context) error, error) {
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return m.Unlock, nil
	}
}

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and
// 64 goroutines, dlock against concurrency.Mutex on the same client.
func BenchmarkUncontended(b *testing.B) {
	srv := testserver.Etcd(b)
	cli := client(b, srv.Endpoint)
	shared := newLocker(b, cli)
	for _, g := range []int{1, 16, 64} {
		for _, im := range impls(cli, func(*testing.B) *dlock.Locker { return shared }) {
			b.Run(fmt.Sprintf("%s/goroutines=%d", im.name, g), func(b *testing.B) {
				fns := make([]lockFunc, g)
				for i := range fns {
					fns[i] = im.make(b, fmt.Sprintf("bench/%s/%d", b.Name(), i))
				}
				runCycles(b, fns)
			})
		}
	}
}

func newLocker(b *testing.B, cli *clientv3.Client) *dlock.Locker {
	l, err := etcdlock.New(cli)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// runCycles spreads b.N acquire+release cycles over the goroutines.
func runCycles(b *testing.B, fns []lockFunc) {
	ctx := context.Background()
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for _, fn := range fns {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				unlock, err := fn(ctx)
				if err == nil {
					err = unlock(ctx)
				}
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// BenchmarkContended: 16 goroutines on one name, each pausing 1 ms after
// its release, each with its own Locker (or Session) on one shared client.
// Reports critical sections per second, the handoff time (release to the
// next grant) and the wait per acquire.
func BenchmarkContended(b *testing.B) {
	srv := testserver.Etcd(b)
	cli := client(b, srv.Endpoint)
	const workers = 16
	for _, im := range impls(cli, func(b *testing.B) *dlock.Locker { return newLocker(b, cli) }) {
		b.Run(im.name, func(b *testing.B) {
			name := "contended/" + newToken()
			fns := make([]lockFunc, workers)
			for i := range fns {
				fns[i] = im.make(b, name)
			}
			r := &contention{}
			var left atomic.Int64
			left.Store(int64(b.N))
			counts := make([]int, workers)
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for i, fn := range fns {
				wg.Go(func() { counts[i] = r.work(b, fn, &left) })
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			r.report(b, elapsed, counts)
		})
	}
}

type contention struct {
	mu       sync.Mutex
	released time.Time // when the last holder released; zero after a grant
	handoffs []time.Duration
	waits    []time.Duration
}

func (r *contention) work(b *testing.B, fn lockFunc, left *atomic.Int64) int {
	ctx := context.Background()
	n := 0
	for left.Add(-1) >= 0 {
		t0 := time.Now()
		unlock, err := fn(ctx)
		if err != nil {
			b.Error(err)
			return n
		}
		r.granted(time.Since(t0))
		n++
		r.mu.Lock()
		r.released = time.Now()
		r.mu.Unlock()
		if err := unlock(ctx); err != nil {
			b.Error(err)
			return n
		}
		time.Sleep(time.Millisecond)
	}
	return n
}

func (r *contention) granted(wait time.Duration) {
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waits = append(r.waits, wait)
	if !r.released.IsZero() {
		r.handoffs = append(r.handoffs, now.Sub(r.released))
		r.released = time.Time{}
	}
}

func (r *contention) report(b *testing.B, elapsed time.Duration, counts []int) {
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "cs/s")
	b.ReportMetric(ms(pct(r.handoffs, 50)), "handoff-p50-ms")
	b.ReportMetric(ms(pct(r.handoffs, 99)), "handoff-p99-ms")
	b.ReportMetric(ms(pct(r.waits, 50)), "wait-p50-ms")
	b.ReportMetric(ms(pct(r.waits, 99)), "wait-p99-ms")
	lo, hi := slices.Min(counts), slices.Max(counts)
	if hi > 0 {
		b.ReportMetric(float64(lo)/float64(hi), "fair-min/max")
	}
	b.ReportMetric(0, "ns/op")
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, len(s)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
