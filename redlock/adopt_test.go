package redlock

import (
	"errors"
	"testing"

	"github.com/dlockdev/dlock"
)

// TestAdoptNeedsMajority: a lease is adopted only when a majority of the
// nodes confirms its token holds it: with the key gone from 2 of 5 nodes
// it is adopted with its fence; gone from 3, it is lost; with 3 nodes
// down, the adoption is a backend error, never a success.
func TestAdoptNeedsMajority(t *testing.T) {
	ns := startNodes(t, 5)
	a := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	b := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ctx := t.Context()
	grant := func(name string) *dlock.Lease {
		ls, err := a.Acquire(ctx, name, dlock.WithTTL(failTTL), dlock.WithAutoRefresh(false))
		if err != nil {
			t.Fatal(err)
		}
		ns.settled(t, name)
		return ls
	}

	minority := grant("adopt/minority")
	ns.expire(t, "adopt/minority", 0, 1)
	adopted, err := b.Resume(ctx, minority.Handle())
	if err != nil {
		t.Fatalf("Resume with the key gone from 2 of 5 nodes: %v", err)
	}
	if adopted.Fence() != minority.Fence() {
		t.Errorf("adopted fence %d, want %d", adopted.Fence(), minority.Fence())
	}
	if err := adopted.Release(ctx); err != nil {
		t.Fatal(err)
	}

	majority := grant("adopt/majority")
	ns.expire(t, "adopt/majority", 0, 1, 2)
	if ls, err := b.Resume(ctx, majority.Handle()); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Resume with the key gone from 3 of 5 nodes = %v, %v; want ErrLost", ls, err)
	}

	down := grant("adopt/down")
	for _, s := range ns.srv[:3] {
		s.Kill()
	}
	if ls, err := b.Resume(ctx, down.Handle()); !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("Resume with 3 of 5 nodes down = %v, %v; want ErrBackend", ls, err)
	}
}
