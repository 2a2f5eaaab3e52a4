package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/redis/go-redis/v9"
)

func TestOpenURL(t *testing.T) {
	ns := startNodes(t, 3)
	for _, q := range []string{"", "node_timeout=100ms&fencing=false", "dial_timeout=1s&pool_size=4", "context_timeout_enabled=true"} {
		l, err := dlock.Open(context.Background(), ns.url(q))
		if err != nil {
			t.Fatalf("Open(%q): %v", ns.url(q), err)
		}
		ls, err := l.Acquire(context.Background(), "url/"+q, dlock.WithWait(10*time.Second))
		if err != nil {
			t.Fatalf("TryAcquire via %q: %v", q, err)
		}
		wantFence := !strings.Contains(q, "fencing=false")
		if (ls.Fence() != 0) != wantFence {
			t.Errorf("%q: fence %d, fencing on = %v", q, ls.Fence(), wantFence)
		}
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	}
}

func TestOpenURLInvalid(t *testing.T) {
	for _, u := range []string{
		"redlock://",
		"redlock://a:1,b:2",
		"redlock://a:1,b:2,c:3,d:4",
		"redlock://a:1,a:1,b:2",
		"redlock://a:1,,b:2",
		"redlock://a:1,b:2,c:3?node_timeout=soon",
		"redlock://a:1,b:2,c:3?node_timeout=-1s",
		"redlock://a:1,b:2,c:3?fencing=maybe",
		"redlock://a:1,b:2,c:3?tls=maybe",
		"redlock://a:1,b:2,c:3?context_timeout_enabled=maybe",
		"redlock://a:1,b:2,c:3?bogus=1",
		"redlock://:s3cret@a:1,b:2,c:3/notadb",
	} {
		l, err := dlock.Open(context.Background(), u)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded, want an invalid argument", u)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", u, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error leaks the password: %v", u, err)
		}
	}
}

func TestNewInvalid(t *testing.T) {
	c := func(addr string) *redis.Client {
		cl := redis.NewClient(&redis.Options{Addr: addr})
		t.Cleanup(func() { _ = cl.Close() })
		return cl
	}
	a, b, d := c("127.0.0.1:1"), c("127.0.0.1:2"), c("127.0.0.1:3")
	for name, clients := range map[string][]redis.UniversalClient{
		"none":        nil,
		"one":         {a},
		"even":        {a, b, d, c("127.0.0.1:4")},
		"nil client":  {a, nil, d},
		"same client": {a, b, a},
		"same node":   {a, b, c("127.0.0.1:1")},
	} {
		if _, err := New(clients); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s: New = %v, want ErrInvalidArgument", name, err)
		}
	}
	_, err := Config{NodeTimeout: -time.Millisecond}.Locker([]redis.UniversalClient{a, b, d})
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "NodeTimeout -1ms") {
		t.Errorf("Config{NodeTimeout: -1ms}.Locker = %v, want ErrInvalidArgument naming NodeTimeout -1ms", err)
	}
	if _, err := New([]redis.UniversalClient{a, b, d}, dlock.WithTTL(-1)); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New(clients, WithTTL(-1)) = %v, want ErrInvalidArgument", err)
	}
}
