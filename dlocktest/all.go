package dlocktest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

const allRounds = 20

// testAcquireAllGoroutines has two goroutines on two Lockers take the same
// two locks, named in opposite orders, over and over: AcquireAll's
// consistent order means neither ever waits out its bound.
func (s *suite) testAcquireAllGoroutines(t *testing.T) {
	a, b := s.name(t, "a"), s.name(t, "b")
	ctx := s.ctx(t)
	var wg sync.WaitGroup
	for _, names := range [][]string{{a, b}, {b, a}} {
		l := s.locker(t)
		wg.Go(func() {
			for range allRounds {
				if err := s.takeAll(ctx, l, names); err != nil {
					t.Errorf("AcquireAll(%q): %v", names, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func (s *suite) takeAll(ctx context.Context, l *dlock.Locker, names []string) error {
	leases, err := l.AcquireAll(ctx, names, s.contendOpts()...)
	if err != nil {
		return err
	}
	if len(leases) != 2 {
		_ = dlock.ReleaseAll(ctx, leases)
		return fmt.Errorf("got %d leases for 2 names", len(leases))
	}
	time.Sleep(time.Millisecond)
	return dlock.ReleaseAll(ctx, leases)
}

// testAcquireAllProcesses is the same with two OS processes.
func (s *suite) testAcquireAllProcesses(t *testing.T) {
	s.needProcesses(t)
	a, b := s.name(t, "a"), s.name(t, "b")
	c1 := s.startChild(t, childSpec{Role: roleAll, Names: []string{a, b}, N: allRounds})
	c2 := s.startChild(t, childSpec{Role: roleAll, Names: []string{b, a}, N: allRounds})
	c1.wait(t, 3*time.Minute)
	c2.wait(t, 3*time.Minute)
}
