package zklock_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/benchwork"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/zklock"
	"github.com/go-zookeeper/zk"
)

// lockFunc takes one lock (waiting if it must) and returns its release.
type lockFunc func(ctx context.Context) (unlock func(context.Context) error, err error)

// impl builds one goroutine's lockFunc for name; setup happens here,
// outside the timed loop.
type impl struct {
	name string
	make func(b *testing.B, name string) lockFunc
}

// impls are dlock's ZooKeeper driver and, as the baseline, go-zookeeper's
// own zk.NewLock (the same recipe, without loss signal, fence or bounded
// wait) on the session conn.
func impls(conn func(b *testing.B) *zk.Conn, lockers func(b *testing.B) *dlock.Locker) []impl {
	return []impl{
		{"dlock", func(b *testing.B, name string) lockFunc { return dlockLock(lockers(b), name) }},
		{"zklock", func(b *testing.B, name string) lockFunc { return zkLock(conn(b), name) }},
	}
}

func dlockLock(l *dlock.Locker, name string) lockFunc {
	return func(ctx context.Context) (func(context.Context) error, error) {
		ls, err := l.Acquire(ctx, name, dlock.WithTTL(sessionTimeout), dlock.WithWait(time.Minute))
		if err != nil {
			return nil, err
		}
		return ls.Release, nil
	}
}

func zkLock(conn *zk.Conn, name string) lockFunc {
	m := zk.NewLock(conn, "/baseline/"+name, zk.WorldACL(zk.PermAll))
	return func(context.Context) (func(context.Context) error, error) {
		if err := m.Lock(); err != nil {
			return nil, err
		}
		return func(context.Context) error { return m.Unlock() }, nil
	}
}

func benchLocker(b *testing.B, conn *zk.Conn) *dlock.Locker {
	l, err := zklock.Config{SessionTimeout: sessionTimeout}.Locker(conn)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	return l
}

// rounds is how many times each implementation runs, interleaved and
// in alternating order (dlock, baseline, baseline, dlock, ...): the
// machine's load drifts during a run, and this spreads the drift over
// both.
const rounds = 3

// inOrder returns ims for round r, reversed every other round.
func inOrder(ims []impl, r int) []impl {
	if r%2 == 0 {
		return []impl{ims[1], ims[0]}
	}
	return ims
}

// warmUp runs both implementations, untimed, so that the JVM serving
// the first measured round has compiled its hot paths like later ones.
func warmUp(b *testing.B, ims []impl) {
	for _, im := range ims {
		prefix := "warm-up/" + im.name + "/" + newToken() + "/"
		fns := map[string]lockFunc{}
		for i := range 16 {
			fns[benchwork.Name(prefix, i)] = im.make(b, benchwork.Name(prefix, i))
		}
		benchwork.Run(b, 2000, 16, prefix, func(ctx context.Context, name string) error {
			unlock, err := fns[name](ctx)
			if err != nil {
				return err
			}
			return unlock(ctx)
		})
	}
}

// BenchmarkUncontended: acquire+release on distinct names from 1, 16 and
// 64 goroutines, dlock against zk.NewLock, both on one shared session.
func BenchmarkUncontended(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	conn := connect(b, srv.Addr)
	shared := benchLocker(b, conn)
	ims := impls(func(*testing.B) *zk.Conn { return conn }, func(*testing.B) *dlock.Locker { return shared })
	warmUp(b, ims)
	for _, g := range []int{1, 16, 64} {
		for r := 1; r <= rounds; r++ {
			for _, im := range inOrder(ims, r) {
				b.Run(fmt.Sprintf("%s/goroutines=%d/round=%d", im.name, g, r), func(b *testing.B) {
					prefix := "bench/" + newToken() + "/"
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
}

// BenchmarkContended: 16 goroutines on one name, each pausing 1 ms after
// its release, each with its own session (a Locker, or a zk.Conn for the
// baseline). Reports critical sections per second, the handoff time and
// the wait per acquire (p50, p99).
func BenchmarkContended(b *testing.B) {
	srv := testserver.ZooKeeper(b)
	const workers = 16
	own := func(b *testing.B) *zk.Conn { return connect(b, srv.Addr) }
	ims := impls(own, func(b *testing.B) *dlock.Locker { return benchLocker(b, own(b)) })
	warmUp(b, ims)
	for r := 1; r <= rounds; r++ {
		for _, im := range inOrder(ims, r) {
			b.Run(fmt.Sprintf("%s/round=%d", im.name, r), func(b *testing.B) {
				name := "contended-" + newToken()
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
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
