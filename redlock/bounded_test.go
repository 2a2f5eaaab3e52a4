package redlock

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// TestFenceStateBounded: 500 names locked and released leave one key on
// each node, its fence counter, and no per-name state; fences still rise
// per name.
func TestFenceStateBounded(t *testing.T) {
	ns := startNodes(t, 3)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ctx := t.Context()
	last := map[string]uint64{}
	for round := range 2 {
		for i := range 250 {
			name := fmt.Sprintf("bounded/%d", i)
			ls, err := l.Acquire(ctx, name, dlock.WithTTL(time.Minute), dlock.WithWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			if ls.Fence() <= last[name] {
				t.Fatalf("round %d: %s fence %d, want > %d", round, name, ls.Fence(), last[name])
			}
			last[name] = ls.Fence()
			if err := ls.Release(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i, c := range ns.admin {
		keys, err := c.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		if len(keys) != 1 || keys[0] != layout.Counter("any", false) {
			t.Errorf("node %d keeps %d keys after 500 released grants, want only the counter %q: %.5q",
				i, len(keys), layout.Counter("any", false), keys)
		}
	}
}

// TestLegacyFenceFolded: a deployment upgraded from per-name counters
// (each name's "<lock key>:fence", here far above the node's counter)
// never sees a fence go back: the first grant folds the old counter into
// the node's and deletes it, on every node.
func TestLegacyFenceFolded(t *testing.T) {
	ns := startNodes(t, 3)
	l := ns.locker(t, Config{NodeTimeout: suiteNodeTimeout})
	ctx := t.Context()
	ls, err := l.Acquire(ctx, "other", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	_ = ls.Release(ctx)
	old := ls.Fence() + 1_000_000
	for _, c := range ns.admin {
		if err := c.Set(ctx, layout.LegacyFence("upgraded"), strconv.FormatUint(old, 10), 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	ls, err = l.Acquire(ctx, "upgraded", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if ls.Fence() <= old {
		t.Errorf("fence %d after an upgrade from a per-name counter at %d: went back", ls.Fence(), old)
	}
	_ = ls.Release(ctx)
	for i, c := range ns.admin {
		if n, err := c.Exists(ctx, layout.LegacyFence("upgraded")).Result(); err != nil || n != 0 {
			t.Errorf("node %d: legacy counter still there (%d, %v)", i, n, err)
		}
	}
	// Other names go on above it too: the node's counter took the old value.
	ls, err = l.Acquire(ctx, "other", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if ls.Fence() <= old {
		t.Errorf("fence of another name %d, want above the folded %d", ls.Fence(), old)
	}
	_ = ls.Release(ctx)
}
