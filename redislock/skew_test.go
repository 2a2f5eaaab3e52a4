package redislock

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

// TestWaitDeadlineOnServerClock: a queued attempt's deadline is sent on
// the server's clock, the caller's deadline moved by the skew, rounded
// down; none when the wait has more than a place's TTL left.
func TestWaitDeadlineOnServerClock(t *testing.T) {
	dl := time.UnixMilli(1_700_000_000_000).Add(700 * time.Microsecond)
	ctx, cancel := context.WithDeadline(context.Background(), dl)
	defer cancel()
	// A deadline in the past still has "what is left" (1 ms): the case
	// the deadline exists for.
	for _, c := range []struct {
		skew int64
		want int64
	}{
		{0, 1_700_000_000_000},
		{5_000_000, 1_700_000_005_000},  // the server 5 s ahead
		{-5_000_000, 1_699_999_995_000}, // the server 5 s behind
		{-800, 1_699_999_999_999},       // rounded down, not to the nearest
	} {
		if got := waitDeadline(ctx, placeTTL, c.skew); got != c.want {
			t.Errorf("waitDeadline(skew %d µs) = %d, want %d", c.skew, got, c.want)
		}
	}
	far, cancelFar := context.WithTimeout(context.Background(), time.Minute)
	defer cancelFar()
	if got := waitDeadline(far, placeTTL, 5_000_000); got != 0 {
		t.Errorf("waitDeadline with a minute left = %d, want 0 (the place's TTL lapses first)", got)
	}
}

// TestSkewSampledFromServer: New reads the server's clock, and a queued
// attempt's reply updates the skew; on one host the sample is the reply's
// latency below zero, never above it.
func TestSkewSampledFromServer(t *testing.T) {
	srv := testserver.Redis(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	defer c.Close()
	d := newDriver(c, config{prefix: "dlock:", fair: true, logger: slog.New(slog.DiscardHandler)}, false)
	defer d.Close()
	d.skew.Store(1 << 40)
	d.prepare()
	if s := d.skew.Load(); s > 0 || s < -int64(time.Second/time.Microsecond) {
		t.Fatalf("skew after New's clock read = %d µs, want in (-1 s, 0] on one host", s)
	}
}
