package dlocktest

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// Contention sizes.
const (
	exclGoroutines = 32
	exclRounds     = 5 // per goroutine
	exclLockers    = 4 // goroutines share this many Lockers
	exclProcesses  = 4
	exclProcRounds = 25 // per process
)

// Contention backoff: fast enough that polling backends hand the lock on
// quickly, slow enough that 31 pollers do not starve the holder's own
// refresh and release on a slow (file, SQLite) backend.
const (
	contendBackoffMin = 2 * time.Millisecond
	contendBackoffMax = 200 * time.Millisecond
)

// contendOpts waits long: contention tests check exclusion, not the wait
// bound.
func (s *suite) contendOpts() []dlock.Option {
	return s.opts(dlock.WithWait(2*time.Minute), dlock.WithBackoff(contendBackoffMin, contendBackoffMax))
}

// racyCounter is bumped by a deliberately non-atomic read-modify-write
// (Load, yield, Store) and counts the times two callers were inside at once.
type racyCounter struct{ value, inside, overlaps atomic.Int64 }

func (c *racyCounter) bump(context.Context, *dlock.Lease) error {
	if c.inside.Add(1) != 1 {
		c.overlaps.Add(1)
	}
	v := c.value.Load()
	runtime.Gosched()
	c.value.Store(v + 1)
	c.inside.Add(-1)
	return nil
}

// testExclusionGoroutines has 32 goroutines on several Lockers each bump a
// racyCounter under the lock; the final count must be exact and no two may
// ever be inside at once.
func (s *suite) testExclusionGoroutines(t *testing.T) {
	name := s.name(t)
	lockers := make([]*dlock.Locker, exclLockers)
	for i := range lockers {
		lockers[i] = s.locker(t)
	}
	var c racyCounter
	ctx := s.ctx(t)
	var wg sync.WaitGroup
	for i := range exclGoroutines {
		wg.Go(func() {
			for range exclRounds {
				if err := dlock.Do(ctx, lockers[i%exclLockers], name, c.bump, s.contendOpts()...); err != nil {
					t.Errorf("Do: %v", err)
				}
			}
		})
	}
	wg.Wait()
	if n := c.overlaps.Load(); n > 0 {
		t.Errorf("%d times two holders were inside the critical section at once", n)
	}
	if got, want := c.value.Load(), int64(exclGoroutines*exclRounds); got != want {
		t.Errorf("counter = %d, want %d: mutual exclusion failed", got, want)
	}
}

// testExclusionProcesses has 4 OS processes (the test binary re-executed)
// each do locked read-modify-writes of a counter kept in a file.
func (s *suite) testExclusionProcesses(t *testing.T) {
	s.needProcesses(t)
	file := filepath.Join(t.TempDir(), "counter")
	if err := os.WriteFile(file, []byte("0"), 0o600); err != nil {
		t.Fatal(err)
	}
	name := s.name(t)
	children := make([]*child, exclProcesses)
	for i := range children {
		children[i] = s.startChild(t, childSpec{Role: roleCounter, Names: []string{name}, File: file, N: exclProcRounds})
	}
	for _, c := range children {
		c.wait(t, 3*time.Minute)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if want := exclProcesses * exclProcRounds; got != want {
		t.Errorf("counter file = %d, want %d: mutual exclusion across processes failed", got, want)
	}
}
