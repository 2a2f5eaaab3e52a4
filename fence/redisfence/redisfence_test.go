package redisfence_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/dlocktest"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/internal/fencetest"
	"github.com/dlockdev/dlock/fence/redisfence"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

func TestMain(m *testing.M) { dlocktest.Main(m) }

func client(t *testing.T, c redis.UniversalClient) *redisfence.Guard {
	t.Helper()
	t.Cleanup(func() { c.Close() })
	g, err := redisfence.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func storeOn(g *redisfence.Guard, key string) fencetest.Store {
	return fencetest.Store{
		Write: func(ctx context.Context, f uint64, v string) error { return g.Set(ctx, key, f, v) },
		Read:  func(ctx context.Context) (string, uint64, bool, error) { return g.Get(ctx, key) },
	}
}

func TestRule(t *testing.T) {
	srv := testserver.Redis(t)
	g := client(t, redis.NewClient(&redis.Options{Addr: srv.Addr, PoolSize: 16}))
	n := 0
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		n++
		return storeOn(g, fmt.Sprintf("doc:%d", n))
	})
}

func TestCluster(t *testing.T) {
	cl := testserver.RedisCluster(t, 3)
	c := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: cl.Addrs})
	g := client(t, c)
	n := 0
	fencetest.Run(t, func(t *testing.T) fencetest.Store {
		n++
		if n%2 == 0 {
			return storeOn(g, fmt.Sprintf("{acct:%d}:balance", n))
		}
		return storeOn(g, fmt.Sprintf("acct:%d", n))
	})
}

func TestFullRange(t *testing.T) {
	srv := testserver.Redis(t)
	g := client(t, redis.NewClient(&redis.Options{Addr: srv.Addr}))
	ctx := context.Background()
	// 2^53+1 and 2^53 are equal as Lua doubles; the script compares exactly.
	const big = uint64(1)<<53 + 1
	if err := g.Set(ctx, "k", big, "new"); err != nil {
		t.Fatal(err)
	}
	if err := g.Set(ctx, "k", big-1, "old"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("fence 2^53 after 2^53+1: %v, want ErrStale", err)
	}
	if err := g.Set(ctx, "k", ^uint64(0), "max"); err != nil {
		t.Fatal(err)
	}
	if err := g.Set(ctx, "k", 9, "nine"); !errors.Is(err, fence.ErrStale) {
		t.Fatalf("fence 9 after MaxUint64 (shorter decimal): %v", err)
	}
}

func TestFenceKey(t *testing.T) {
	for key, want := range map[string]string{
		"acct:1":           "{acct:1}:fence",
		"{acct:1}:balance": "{acct:1}:balance:fence",
		"a{b}c":            "a{b}c:fence",
		"{acct":            "{{acct}:fence",
	} {
		if got, err := redisfence.FenceKey(key); err != nil || got != want {
			t.Errorf("FenceKey(%q) = %q, %v; want %q", key, got, err, want)
		}
	}
	for _, bad := range []string{"", "a}b", "{}x"} {
		if _, err := redisfence.FenceKey(bad); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("FenceKey(%q) = %v, want ErrInvalidArgument", bad, err)
		}
	}
	if _, err := redisfence.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New(nil) = %v", err)
	}
}
