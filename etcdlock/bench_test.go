package etcdlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/internal/testing/testserver"
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
// concurrency.Mutex, both on the client cli. session gives the Mutex its
// Session: one shared by every goroutine (uncontended), or one per worker
// (contended: Mutexes of one name on one Session are the same lock key).
func impls(cli *clientv3.Client, lockers func(b *testing.B) *dlock.Locker, session func(b *testing.B) *concurrency.Session) []impl {
	return []impl{
		{"dlock", func(b *testing.B, name string) lockFunc { return dlockLock(lockers(b), name) }},
		{"mutex", func(b *testing.B, name string) lockFunc { return mutexLock(session(b), name) }},
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

func newSession(b *testing.B, cli *clientv3.Client) *concurrency.Session {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

func mutexLock(s *concurrency.Session, name string) lockFunc {
	m := concurrency.NewMutex(s, "mutex/"+name)
	return func(ctx context.Context) (func(context.Context) error, error) {
		if err := m.Lock(ctx); err != nil {
			return nil, err
		}
		return m.Unlock, nil
	}
}

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and
// 64 goroutines, dlock (one Locker) against concurrency.Mutex (one
// Session) on the same client.
func BenchmarkUncontended(b *testing.B) {
	srv := testserver.Etcd(b)
	cli := client(b, srv.Endpoint)
	shared := newLocker(b, cli)
	sess := newSession(b, cli)
	for _, g := range []int{1, 16, 64} {
		for _, im := range impls(cli, func(*testing.B) *dlock.Locker { return shared }, func(*testing.B) *concurrency.Session { return sess }) {
			b.Run(fmt.Sprintf("%s/goroutines=%d", im.name, g), func(b *testing.B) {
				prefix := "bench/" + b.Name() + "/"
				fns := make(map[string]lockFunc, g)
				for i := range g {
					name := benchwork.Name(prefix, i)
					fns[name] = im.make(b, name)
				}
				benchwork.Uncontended(b, g, prefix, func(ctx context.Context, name string) error {
					unlock, err := fns[name](ctx)
					if err != nil {
						return err
					}
					return unlock(ctx)
				}).ReportRate(b, "ops/s")
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

// BenchmarkContended: 16 goroutines on one name, each pausing 1 ms after
// its release, each with its own Locker (or Session) on one shared client.
// Reports critical sections per second, the handoff time (release to the
// next grant), the wait per acquire, and, measured just before on the same
// client, the p50 latency of one etcd Put (put-p50-ms) and the handoff p50
// over it (handoff/put).
func BenchmarkContended(b *testing.B) {
	srv := testserver.Etcd(b)
	cli := client(b, srv.Endpoint)
	const workers = 16
	for _, im := range impls(cli, func(b *testing.B) *dlock.Locker { return newLocker(b, cli) }, func(b *testing.B) *concurrency.Session { return newSession(b, cli) }) {
		b.Run(im.name, func(b *testing.B) {
			name := "contended/" + newToken()
			fns := make([]lockFunc, workers)
			for i := range fns {
				fns[i] = im.make(b, name)
			}
			put := putLatency(b, cli)
			c := benchwork.Contended(b, workers, func(ctx context.Context, worker int) (func(context.Context) error, error) {
				return fns[worker](ctx)
			})
			c.Report(b)
			b.ReportMetric(ms(put), "put-p50-ms")
			b.ReportMetric(float64(median(c.Handoffs))/float64(put), "handoff/put")
		})
	}
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// putLatency is the p50 latency of one etcd Put on cli, over 200 Puts.
func putLatency(b *testing.B, cli *clientv3.Client) time.Duration {
	lat := make([]time.Duration, 200)
	for i := range lat {
		t0 := time.Now()
		if _, err := cli.Put(context.Background(), "bench/put-probe", "x"); err != nil {
			b.Fatal(err)
		}
		lat[i] = time.Since(t0)
	}
	return median(lat)
}

func median(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ratioRounds is how many alternating rounds a ratio benchmark runs per
// implementation: on a noisy machine, interleaving keeps both sides under
// the same conditions.
const ratioRounds = 6

// BenchmarkUncontendedRatio: dlock (one Locker) and concurrency.Mutex (one
// Session) in alternating rounds on one server and client, each round
// b.N/ratioRounds cycles over g goroutines on distinct names. Reports both
// rates and dlock's ratio to the Mutex (ratio, the goal being >= 0.9).
func BenchmarkUncontendedRatio(b *testing.B) {
	srv := testserver.Etcd(b)
	cli := client(b, srv.Endpoint)
	shared := newLocker(b, cli)
	sess := newSession(b, cli)
	for _, g := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			ims := impls(cli, func(*testing.B) *dlock.Locker { return shared }, func(*testing.B) *concurrency.Session { return sess })
			cycles := make([]benchwork.Cycle, len(ims))
			for i, im := range ims {
				prefix := "ratio/" + b.Name() + "/" + im.name + "/"
				fns := make(map[string]lockFunc, g)
				for w := range g {
					name := benchwork.Name(prefix, w)
					fns[name] = im.make(b, name)
				}
				cycles[i] = func(ctx context.Context, name string) error {
					unlock, err := fns[name](ctx)
					if err != nil {
						return err
					}
					return unlock(ctx)
				}
			}
			per := max(b.N/ratioRounds, g)
			done := make([]int, len(ims))
			took := make([]time.Duration, len(ims))
			b.ResetTimer()
			for r := range ratioRounds {
				for k := range ims {
					i := (r + k) % len(ims) // alternate who goes first
					c := benchwork.Run(b, per, g, "ratio/"+b.Name()+"/"+ims[i].name+"/", cycles[i])
					done[i] += c.N - c.Failed
					took[i] += c.Elapsed
				}
			}
			b.StopTimer()
			rate := func(i int) float64 { return float64(done[i]) / took[i].Seconds() }
			b.ReportMetric(rate(0), "dlock-ops/s")
			b.ReportMetric(rate(1), "mutex-ops/s")
			b.ReportMetric(rate(0)/rate(1), "ratio")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkContendedRatio: 16 workers on one name (each with its own
// Locker, or Session), dlock and concurrency.Mutex in alternating rounds
// of b.N critical sections, while a probe on the same client times one
// etcd Put every few milliseconds (the latency of one write under the same
// load; idle-put-p50-ms is the same between rounds). Reports both rates,
// their ratio (cs-ratio, the goal being >= 2.5), dlock's handoff p50 and
// the Put p50 over all rounds, and their ratio (handoff/put, the goal being
// <= 1.5). Run it with a fixed count (-benchtime 1500x): benchwork.Contended
// restarts the benchmark timer each round, which misleads the calibration
// of a -benchtime duration.
func BenchmarkContendedRatio(b *testing.B) {
	srv := testserver.Etcd(b)
	cli := client(b, srv.Endpoint)
	const workers = 16
	ims := impls(cli, func(b *testing.B) *dlock.Locker { return newLocker(b, cli) }, func(b *testing.B) *concurrency.Session { return newSession(b, cli) })
	locks := make([][]lockFunc, len(ims))
	for i, im := range ims {
		name := "contended-ratio/" + im.name + "/" + newToken()
		for range workers {
			locks[i] = append(locks[i], im.make(b, name))
		}
	}
	const rounds = 3
	done := make([]int, len(ims))
	took := make([]time.Duration, len(ims))
	var handoffs, idle, loaded []time.Duration
	for r := range rounds {
		for k := range ims {
			i := (r + k) % len(ims)
			idle = append(idle, putLatency(b, cli))
			stop := probePuts(b, cli)
			c := benchwork.Contended(b, workers, func(ctx context.Context, worker int) (func(context.Context) error, error) {
				return locks[i][worker](ctx)
			})
			puts := stop()
			done[i] += c.N
			took[i] += c.Elapsed
			if i == 0 {
				handoffs = append(handoffs, c.Handoffs...)
				loaded = append(loaded, puts...)
			}
		}
	}
	rate := func(i int) float64 { return float64(done[i]) / took[i].Seconds() }
	b.ReportMetric(rate(0), "dlock-cs/s")
	b.ReportMetric(rate(1), "mutex-cs/s")
	b.ReportMetric(rate(0)/rate(1), "cs-ratio")
	b.ReportMetric(ms(median(handoffs)), "handoff-p50-ms")
	b.ReportMetric(ms(median(loaded)), "put-p50-ms")
	b.ReportMetric(ms(median(idle)), "idle-put-p50-ms")
	b.ReportMetric(float64(median(handoffs))/float64(median(loaded)), "handoff/put")
	b.ReportMetric(0, "ns/op")
}

// probePuts times one Put on cli every 2 ms until the returned function
// is called; it returns the latencies.
func probePuts(b *testing.B, cli *clientv3.Client) (stop func() []time.Duration) {
	quit := make(chan struct{})
	out := make(chan []time.Duration)
	go func() {
		var lat []time.Duration
		for {
			select {
			case <-quit:
				out <- lat
				return
			case <-time.After(2 * time.Millisecond):
			}
			t0 := time.Now()
			if _, err := cli.Put(context.Background(), "bench/put-probe", "x"); err != nil {
				b.Error(err)
			}
			lat = append(lat, time.Since(t0))
		}
	}()
	return func() []time.Duration {
		close(quit)
		return <-out
	}
}

// BenchmarkHandoff: one holder and one waiter on one name, each with its
// own Locker (or Session) on one client; the holder releases while the
// waiter waits, and one etcd Put is timed after each handoff. The three
// kinds of waiter take turns, b.N handoffs each, so that load from other
// processes hits them alike: a dlock waiter with a wait bound (the
// default, which claims its key with one write when it becomes first, see
// claim.go), one without (dlock.Forever: no claim), and
// concurrency.Mutex. Reports each one's handoff p50 (release called to
// the waiter's grant) over the p50 of the Puts timed in the same run
// (KIND-handoff/put), and the Put p50. The floor of a handoff is the
// release's own write: etcd tells the watcher of a deletion as it answers
// the deleting client (delete-event/put: a Delete, to its event at a
// watch on another client).
func BenchmarkHandoff(b *testing.B) {
	srv := testserver.Etcd(b)
	cli := client(b, srv.Endpoint)
	type pair struct {
		kind           string
		holder, waiter lockFunc
		hand           []time.Duration
	}
	bounded, unbounded := []dlock.Option{dlock.WithWait(time.Minute)}, []dlock.Option{dlock.WithWait(dlock.Forever)}
	n1, n2, n3 := "handoff/"+newToken(), "handoff/"+newToken(), "handoff/"+newToken()
	pairs := []*pair{
		{kind: "bounded", holder: handoffLock(newLocker(b, cli), n1, bounded), waiter: handoffLock(newLocker(b, cli), n1, bounded)},
		{kind: "unbounded", holder: handoffLock(newLocker(b, cli), n2, unbounded), waiter: handoffLock(newLocker(b, cli), n2, unbounded)},
		{kind: "mutex", holder: mutexLock(newSession(b, cli), n3), waiter: mutexLock(newSession(b, cli), n3)},
	}
	ctx := context.Background()
	// The floor: a key's deletion, from the Delete call to its event at a
	// watch on another client that watches it already.
	other := client(b, srv.Endpoint)
	floorKey := "handoff/floor-" + newToken()
	events := other.Watch(ctx, floorKey)
	var puts, floor []time.Duration
	b.ResetTimer()
	for range b.N {
		d, err := deleteEvent(ctx, cli, events, floorKey)
		if err != nil {
			b.Fatal(err)
		}
		floor = append(floor, d)
		for _, p := range pairs {
			d, err := handoff(ctx, p.holder, p.waiter)
			if err != nil {
				b.Fatalf("%s: %v", p.kind, err)
			}
			p.hand = append(p.hand, d)
			t0 := time.Now()
			if _, err := cli.Put(ctx, "bench/put-probe", "x"); err != nil {
				b.Fatal(err)
			}
			puts = append(puts, time.Since(t0))
		}
	}
	b.StopTimer()
	put := median(puts)
	b.ReportMetric(ms(put), "put-p50-ms")
	b.ReportMetric(float64(median(floor))/float64(put), "delete-event/put")
	for _, p := range pairs {
		b.ReportMetric(float64(median(p.hand))/float64(put), p.kind+"-handoff/put")
	}
	b.ReportMetric(0, "ns/op")
}

// deleteEvent puts key, waits for its event, and returns the time from
// the call deleting it to the deletion's event on events.
func deleteEvent(ctx context.Context, cli *clientv3.Client, events clientv3.WatchChan, key string) (time.Duration, error) {
	if _, err := cli.Put(ctx, key, "x"); err != nil {
		return 0, err
	}
	if resp := <-events; resp.Err() != nil {
		return 0, resp.Err()
	}
	t0 := time.Now()
	if _, err := cli.Delete(ctx, key); err != nil {
		return 0, err
	}
	resp := <-events
	return time.Since(t0), resp.Err()
}

// handoff takes holder, starts waiter, releases holder once the waiter is
// queued, and returns the time from that release to the waiter's grant.
func handoff(ctx context.Context, holder, waiter lockFunc) (time.Duration, error) {
	unlock, err := holder(ctx)
	if err != nil {
		return 0, err
	}
	type grant struct {
		at  time.Time
		err error
	}
	got := make(chan grant, 1)
	go func() {
		u, err := waiter(ctx)
		at := time.Now()
		if err == nil {
			err = u(ctx)
		}
		got <- grant{at, err}
	}()
	time.Sleep(3 * time.Millisecond) // the waiter is queued and watching
	t0 := time.Now()
	if err := unlock(ctx); err != nil {
		return 0, err
	}
	g := <-got
	return g.at.Sub(t0), g.err
}

func handoffLock(l *dlock.Locker, name string, opts []dlock.Option) lockFunc {
	return func(ctx context.Context) (func(context.Context) error, error) {
		ls, err := l.Acquire(ctx, name, append([]dlock.Option{dlock.WithTTL(10 * time.Second)}, opts...)...)
		if err != nil {
			return nil, err
		}
		return ls.Release, nil
	}
}
