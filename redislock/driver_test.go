package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

func testDriver(t *testing.T, c redis.UniversalClient) *redisDriver {
	t.Helper()
	cfg := defaultConfig()
	cfg.logger = slog.New(slog.DiscardHandler)
	d := newDriver(c, cfg, false)
	d.prepare()
	t.Cleanup(func() { _ = d.Close() })
	return d
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func singleClient(t *testing.T) redis.UniversalClient {
	srv := testserver.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestLostReplyRetry: an attempt that finds its own token (the first
// reply was lost) is a grant with the stored fence, and renews the TTL.
func TestLostReplyRetry(t *testing.T) {
	c := singleClient(t)
	d := testDriver(t, c)
	ctx := testCtx(t)
	req := driver.Request{Name: "lost-reply", Token: "tok-1", Owner: "me", TTL: 300 * time.Millisecond}
	g1, err := d.TryAcquire(ctx, req)
	if err != nil || !g1.Acquired {
		t.Fatalf("first attempt: %+v, %v", g1, err)
	}
	req.TTL = time.Minute
	g2, err := d.TryAcquire(ctx, req)
	if err != nil || !g2.Acquired || g2.Fence != g1.Fence {
		t.Fatalf("retry = %+v, %v; want a grant with fence %d", g2, err, g1.Fence)
	}
	if ttl := c.PTTL(ctx, d.keys.Lock(req.Name)).Val(); ttl < 30*time.Second {
		t.Errorf("PTTL after the retry = %s, want the retry's TTL", ttl)
	}
	other := driver.Request{Name: req.Name, Token: "tok-2", Owner: "you", TTL: time.Second}
	g3, err := d.TryAcquire(ctx, other)
	if err != nil || g3.Acquired || g3.Holder.Owner != "me" || g3.Holder.Fence != g1.Fence || g3.Holder.TTL <= 0 {
		t.Errorf("another token = %+v, %v; want held by me with fence %d and a TTL", g3, err, g1.Fence)
	}
}

// TestRefreshOutcomes: refresh never re-creates a lock and says why not.
func TestRefreshOutcomes(t *testing.T) {
	c := singleClient(t)
	d := testDriver(t, c)
	ctx := testCtx(t)
	if err := d.Refresh(ctx, "r", "tok", time.Second); !errors.Is(err, driver.ErrExpired) {
		t.Errorf("refresh of a missing lock = %v, want ErrExpired", err)
	}
	if n := c.Exists(ctx, d.keys.Lock("r")).Val(); n != 0 {
		t.Error("refresh re-created a missing lock")
	}
	if _, err := d.TryAcquire(ctx, driver.Request{Name: "r", Token: "other", Owner: "o", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := d.Refresh(ctx, "r", "tok", time.Second); !errors.Is(err, driver.ErrTakenOver) {
		t.Errorf("refresh of another's lock = %v, want ErrTakenOver", err)
	}
	if err := d.Release(ctx, "r", "tok"); !errors.Is(err, driver.ErrTakenOver) {
		t.Errorf("release of another's lock = %v, want ErrTakenOver", err)
	}
	if err := d.Release(ctx, "r", "other"); err != nil {
		t.Errorf("release = %v", err)
	}
	if err := d.Release(ctx, "r", "other"); !errors.Is(err, driver.ErrExpired) {
		t.Errorf("second release = %v, want ErrExpired", err)
	}
}

// testBatch takes n locks, steals one and deletes another, and checks one
// batched refresh reports each outcome.
func testBatch(t *testing.T, c redis.UniversalClient) {
	d := testDriver(t, c)
	ctx := testCtx(t)
	var items []driver.RefreshItem
	for i := range 200 {
		req := driver.Request{Name: fmt.Sprintf("batch/%d", i), Token: fmt.Sprintf("t%d", i), Owner: "b", TTL: time.Second}
		if g, err := d.TryAcquire(ctx, req); err != nil || !g.Acquired {
			t.Fatalf("acquire %d: %+v %v", i, g, err)
		}
		items = append(items, driver.RefreshItem{Name: req.Name, Token: req.Token, TTL: time.Minute})
	}
	c.Del(ctx, d.keys.Lock("batch/7"))
	c.Set(ctx, d.keys.Lock("batch/9"), "thief\n1\nx", time.Minute)
	results, err := d.RefreshBatch(ctx, items)
	if err != nil || len(results) != len(items) {
		t.Fatalf("RefreshBatch = %d results, %v", len(results), err)
	}
	for i, err := range results {
		want := error(nil)
		switch i {
		case 7:
			want = driver.ErrExpired
		case 9:
			want = driver.ErrTakenOver
		}
		if !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("result %d = %v, want %v", i, err, want)
		}
	}
	if ttl := c.PTTL(ctx, d.keys.Lock("batch/100")).Val(); ttl < 30*time.Second {
		t.Errorf("PTTL after batch refresh = %s, want about a minute", ttl)
	}
}

func TestRefreshBatch(t *testing.T) { testBatch(t, singleClient(t)) }

func TestRefreshBatchCluster(t *testing.T) {
	cl := testserver.RedisCluster(t, 3)
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs})
	t.Cleanup(func() { _ = c.Close() })
	testBatch(t, c)
}

// TestSlot checks the CRC16 slot against the server's CLUSTER KEYSLOT.
func TestSlot(t *testing.T) {
	cl := testserver.RedisCluster(t, 1)
	c := redis.NewClient(&redis.Options{Addr: cl.Addrs[0]})
	t.Cleanup(func() { _ = c.Close() })
	for _, key := range []string{"", "a", "dlock:{x}", "dlock:{x}:fence", "{}a", "a{b}c{d}", "{user1000}.following", "123456789"} {
		want, err := c.ClusterKeySlot(testCtx(t), key).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got := rediscore.Slot(key); int64(got) != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}
