// Package fencetest holds the behaviour tests every fence guard runs
// against its real store: two writers in both orders, and many concurrent
// writers with random fences.
package fencetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/fence"
)

// Store is one fenced resource under test.
type Store struct {
	// Write writes value with fence f to the resource.
	Write func(ctx context.Context, f uint64, value string) error
	// Read returns the stored value and fence (ok false when empty).
	Read func(ctx context.Context) (value string, f uint64, ok bool, err error)
}

// NewStore makes a fresh, empty resource for one subtest.
type NewStore func(t *testing.T) Store

// Run runs every behaviour as a subtest.
func Run(t *testing.T, newStore NewStore) {
	t.Run("LowerAfterHigher", func(t *testing.T) { twoWriters(t, newStore(t), 34, 33) })
	t.Run("HigherAfterLower", func(t *testing.T) { twoWriters(t, newStore(t), 33, 34) })
	t.Run("EqualAccepted", func(t *testing.T) { equal(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { concurrent(t, newStore(t), 8, 40) })
}

func value(f uint64, writer, i int) string { return fmt.Sprintf("%d/%d/%d", f, writer, i) }

func fenceOf(v string) uint64 {
	s, _, _ := strings.Cut(v, "/")
	f, _ := strconv.ParseUint(s, 10, 64)
	return f
}

func twoWriters(t *testing.T, s Store, first, second uint64) {
	ctx := context.Background()
	if err := s.Write(ctx, first, value(first, 1, 0)); err != nil {
		t.Fatalf("first write, fence %d: %v", first, err)
	}
	err := s.Write(ctx, second, value(second, 2, 0))
	want := max(first, second)
	if second < first {
		var se *fence.StaleError
		if !errors.Is(err, fence.ErrStale) || !errors.As(err, &se) {
			t.Fatalf("write with fence %d after %d: err = %v, want a *fence.StaleError", second, first, err)
		}
		if se.Offered != second || se.Current != first {
			t.Errorf("StaleError offered %d current %d, want %d and %d (%v)", se.Offered, se.Current, second, first, err)
		}
	} else if err != nil {
		t.Fatalf("write with fence %d after %d: %v", second, first, err)
	}
	checkStored(t, s, want)
}

func checkStored(t *testing.T, s Store, want uint64) {
	t.Helper()
	v, f, ok, err := s.Read(context.Background())
	if err != nil || !ok {
		t.Fatalf("read: ok=%v err=%v", ok, err)
	}
	if f != want || fenceOf(v) != want {
		t.Fatalf("stored value %q with fence %d, want fence %d", v, f, want)
	}
}

func equal(t *testing.T, s Store) {
	ctx := context.Background()
	for i := range 3 {
		if err := s.Write(ctx, 7, value(7, 1, i)); err != nil {
			t.Fatalf("write %d under the same fence 7: %v (equal fences must be accepted)", i, err)
		}
	}
	v, _, _, err := s.Read(ctx)
	if err != nil || v != value(7, 1, 2) {
		t.Fatalf("stored %q (%v), want the last write %q", v, err, value(7, 1, 2))
	}
	if err := s.Write(ctx, 6, value(6, 2, 0)); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("write with fence 6 after 7: %v, want ErrStale", err)
	}
}

// outcome is one write as seen by its writer.
type outcome struct {
	f          uint64
	start, end time.Time
	accepted   bool
	current    uint64 // for a rejection
}

func concurrent(t *testing.T, s Store, writers, each int) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu  sync.Mutex
		all []outcome
		wg  sync.WaitGroup
	)
	stop := make(chan struct{})
	var seen []uint64
	var readErr error
	wg.Add(1)
	go func() { defer wg.Done(); seen, readErr = sample(ctx, s, stop) }()
	// Rounds: every writer makes its i-th write at the same moment, so the
	// writes of a round race each other in the store.
	for i := range each {
		var ww sync.WaitGroup
		for w := range writers {
			ww.Go(func() {
				o := write(ctx, t, s, offer(i), w, i)
				mu.Lock()
				all = append(all, o)
				mu.Unlock()
			})
		}
		ww.Wait()
	}
	close(stop)
	wg.Wait()
	if readErr != nil {
		t.Fatalf("reader: %v", readErr)
	}
	verify(t, s, all, seen)
}

// offer draws the i-th fence of a writer: rising with i, with jitter wide
// enough that writers overtake each other, and now and then a fully random
// (usually stale) one.
func offer(i int) uint64 {
	if rand.N(5) == 0 {
		return rand.Uint64N(uint64(10*i+30)) + 1
	}
	return uint64(10*i) + rand.Uint64N(30) + 1
}

func write(ctx context.Context, t *testing.T, s Store, f uint64, w, i int) outcome {
	o := outcome{f: f, start: time.Now()}
	err := s.Write(ctx, f, value(f, w, i))
	o.end = time.Now()
	var se *fence.StaleError
	switch {
	case err == nil:
		o.accepted = true
	case errors.As(err, &se):
		o.current = se.Current
	default:
		t.Errorf("write fence %d: %v", f, err)
	}
	return o
}

// sample reads the resource until stop, returning the fences seen, and
// fails if a stored value does not carry its fence.
func sample(ctx context.Context, s Store, stop <-chan struct{}) ([]uint64, error) {
	var seen []uint64
	for {
		select {
		case <-stop:
			return seen, nil
		default:
		}
		v, f, ok, err := s.Read(ctx)
		if err != nil {
			return seen, err
		}
		if ok && fenceOf(v) != f {
			return seen, fmt.Errorf("stored value %q carries fence %d but the stored fence is %d", v, fenceOf(v), f)
		}
		if ok {
			seen = append(seen, f)
		}
	}
}

func verify(t *testing.T, s Store, all []outcome, seen []uint64) {
	var maxOffered, accepted, rejected uint64
	for _, o := range all {
		maxOffered = max(maxOffered, o.f)
		if o.accepted {
			accepted++
		} else {
			rejected++
		}
	}
	t.Logf("%d writes: %d accepted, %d rejected; %d reads", len(all), accepted, rejected, len(seen))
	for i := 1; i < len(seen); i++ {
		if seen[i] < seen[i-1] {
			t.Fatalf("the stored fence went down: read %d, then %d", seen[i-1], seen[i])
		}
	}
	for _, o := range all {
		checkOutcome(t, o, all)
	}
	checkStored(t, s, maxOffered)
}

// checkOutcome: an accepted write carries a fence no lower than any write
// acknowledged before it started; a rejection names a higher fence that
// was really accepted.
func checkOutcome(t *testing.T, o outcome, all []outcome) {
	t.Helper()
	for _, p := range all {
		if o.accepted && p.accepted && p.end.Before(o.start) && p.f > o.f {
			t.Fatalf("write with fence %d landed after fence %d had been accepted", o.f, p.f)
		}
	}
	if o.accepted {
		return
	}
	if o.current != 0 && o.current <= o.f {
		t.Fatalf("write with fence %d rejected, but the reported current fence is %d", o.f, o.current)
	}
	if o.current != 0 && !acceptedFence(all, o.current) {
		t.Fatalf("write with fence %d rejected because of fence %d, which no accepted write carried", o.f, o.current)
	}
}

func acceptedFence(all []outcome, f uint64) bool {
	for _, o := range all {
		if o.accepted && o.f == f {
			return true
		}
	}
	return false
}
