package benchwork_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// TestHoldMeasuresMemoryAndRelease: a hold reports the heap its leases
// keep alive and how long their release took.
func TestHoldMeasuresMemoryAndRelease(t *testing.T) {
	rc := benchwork.CountRefreshes(memLockers(t, 1)[0].Driver())
	l, err := dlock.NewLocker(rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	h, err := benchwork.Hold{Locker: l, Counter: rc, N: 500, Workers: 4, Prefix: "mem/", For: 10 * time.Millisecond,
		Opts: []dlock.Option{dlock.WithTTL(3 * time.Second)}}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// A lease and its watchdog entry are hundreds of bytes; far more
	// would mean the garbage of taking them was counted.
	if h.HeapPerLease <= 0 || h.HeapPerLease > 16<<10 {
		t.Errorf("heap per lease %.0f B, want between 0 and 16 KiB", h.HeapPerLease)
	}
	if !h.Released || h.Release <= 0 {
		t.Errorf("release: %v, released %v", h.Release, h.Released)
	}
}

// stuckReleases is a driver whose releases wait until it is closed.
type stuckReleases struct {
	driver.Driver
	once   sync.Once
	closed chan struct{}
}

func (s *stuckReleases) Release(ctx context.Context, name, token string) error {
	<-s.closed
	return errors.New("closed")
}

func (s *stuckReleases) Close() error {
	s.once.Do(func() { close(s.closed) })
	return nil
}

// TestHoldCutsSlowReleaseShort: a release slower than ReleaseWait is cut
// short by closing the driver, and reported unfinished.
func TestHoldCutsSlowReleaseShort(t *testing.T) {
	stuck := &stuckReleases{Driver: memLockers(t, 1)[0].Driver(), closed: make(chan struct{})}
	rc := benchwork.CountRefreshes(stuck)
	l, err := dlock.NewLocker(rc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	h, err := benchwork.Hold{Locker: l, Counter: rc, N: 3, Workers: 1, Prefix: "stuck/", For: 10 * time.Millisecond,
		ReleaseWait: 50 * time.Millisecond}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if h.Released || h.Release != 50*time.Millisecond {
		t.Errorf("release: %v, released %v; want cut short at 50ms", h.Release, h.Released)
	}
}
