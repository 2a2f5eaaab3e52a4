package redlock

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// TestRefreshBatchOutcomes: one batched refresh decides each lease as
// Refresh would: extended where a majority holds it (one node that lost
// the key is not re-created), ErrTakenOver where a majority has another
// token, ErrExpired where a majority has nothing.
func TestRefreshBatchOutcomes(t *testing.T) {
	ns := startNodes(t, 3)
	drv, err := Config{}.Driver(ns.clients(t))
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	ctx := context.Background()
	cases := []struct {
		what string
		hurt func(name string)
		want error
	}{
		{"held", func(string) {}, nil},
		{"lost on one node", func(name string) { ns.expire(t, name, 0) }, nil},
		{"stolen", func(name string) { ns.steal(t, name) }, driver.ErrTakenOver},
		{"expired", func(name string) { ns.expire(t, name) }, driver.ErrExpired},
	}
	items := make([]driver.RefreshItem, len(cases))
	for i, c := range cases {
		req := driver.Request{Name: t.Name() + "/" + c.what, Token: fmt.Sprintf("%032x", i+1), Owner: "test", TTL: 5 * time.Second}
		g, err := drv.TryAcquire(ctx, req)
		if err != nil || !g.Acquired {
			t.Fatalf("acquire %q: %+v, %v", req.Name, g, err)
		}
		c.hurt(req.Name)
		items[i] = driver.RefreshItem{Name: req.Name, Token: req.Token, TTL: 20 * time.Second}
	}
	results, err := drv.(driver.BatchRefresher).RefreshBatch(ctx, items)
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range cases {
		if c.want == nil && results[i] != nil || c.want != nil && !errors.Is(results[i], c.want) {
			t.Errorf("%s: %v, want %v", c.what, results[i], c.want)
		}
	}
	for _, i := range ns.holding(t, items[0].Name) {
		if ttl := ns.admin[i].PTTL(ctx, lockKey(items[0].Name)).Val(); ttl < 10*time.Second {
			t.Errorf("node %d: TTL %s after the refresh to 20s", i, ttl)
		}
	}
	if on := ns.holding(t, items[1].Name); len(on) != 2 || on[0] == 0 {
		t.Errorf("lease lost on node 0 is on nodes %v after the refresh, want [1 2] (never re-created)", on)
	}
}

// TestRefreshBatchHoldsManyLeases: thousands of leases on one Locker are
// refreshed in batches (one call per thousand leases, not one per lease)
// and none is lost.
func TestRefreshBatchHoldsManyLeases(t *testing.T) {
	ns := startNodes(t, 3)
	drv, err := Config{}.Driver(ns.clients(t))
	if err != nil {
		t.Fatal(err)
	}
	counter := benchwork.CountRefreshes(drv)
	l, err := dlock.NewLocker(counter, dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	h, err := benchwork.Hold{Locker: l, Counter: counter, N: 3000, Workers: 32, Prefix: t.Name(), For: 3 * time.Second}.Run(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d leases held %s: %d refreshes in %d calls, %d lost", h.Leases, h.Held.Round(time.Millisecond), h.Refreshes, h.Calls, h.Lost)
	switch {
	case h.Lost != 0:
		t.Fatalf("%d of %d leases lost", h.Lost, h.Leases)
	case h.Refreshes < int64(h.Leases):
		t.Fatalf("%d refreshes of %d leases over three TTLs", h.Refreshes, h.Leases)
	case h.Calls*100 > h.Refreshes:
		t.Fatalf("%d refreshes took %d calls: not batched", h.Refreshes, h.Calls)
	}
}
