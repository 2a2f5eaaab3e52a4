package etcdlock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/benchwork"
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
			benchwork.Contended(b, workers, func(ctx context.Context, worker int) (func(context.Context) error, error) {
				return fns[worker](ctx)
			}).Report(b)
		})
	}
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
