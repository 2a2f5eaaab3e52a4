package etcdlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func driverRequest(name string, ttl time.Duration) driver.Request {
	return driver.Request{Name: name, Token: "0123456789abcdef0123456789abcdef", Owner: "test", TTL: ttl}
}

func TestOpenBadURLs(t *testing.T) {
	for _, raw := range []string{
		"etcd://",
		"etcd://127.0.0.1",
		"etcd://127.0.0.1:0",
		"etcd://127.0.0.1:2379,127.0.0.1",
		"etcd://127.0.0.1:2379/some/path",
		"etcd://127.0.0.1:2379?bogus=1",
		"etcd://127.0.0.1:2379?prefix=",
		"etcd://127.0.0.1:2379?dial_timeout=soon",
		"etcd://user:s3cret@127.0.0.1:2379?bogus=1",
	} {
		l, err := dlock.Open(context.Background(), raw)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument", raw, err)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error shows the password: %v", raw, err)
		}
	}
}

// TestOpenUnreachableHidesPassword: a connection failure names the
// endpoint but not the password.
func TestOpenUnreachableHidesPassword(t *testing.T) {
	port := testserver.FreePort(t)
	raw := "etcd://user:s3cret@127.0.0.1:" + itoa(port) + "?dial_timeout=300ms"
	l, err := dlock.Open(context.Background(), raw)
	if err == nil {
		_ = l.Close()
		t.Fatal("Open of a closed port succeeded")
	}
	if strings.Contains(err.Error(), "s3cret") {
		t.Errorf("error shows the password: %v", err)
	}
	t.Logf("unreachable: %v", err)
}

// TestOpenURL: the URL's endpoints and prefix are used.
func TestOpenURL(t *testing.T) {
	srv := testserver.Etcd(t)
	ctx := context.Background()
	l, err := dlock.Open(ctx, "etcd://"+srv.Endpoint+",127.0.0.1:1?prefix=custom/&dial_timeout=10s&ttl=3s&election_timeout=250ms")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	ls, err := l.Acquire(ctx, "a/b c")
	if err != nil {
		t.Fatal(err)
	}
	if ls.TTL() != 3*time.Second {
		t.Errorf("TTL = %s, want the URL's 3s", ls.TTL())
	}
	resp, err := client(t, srv.Endpoint).Get(ctx, "custom/a%2Fb%20c/", clientv3.WithPrefix())
	if err != nil || len(resp.Kvs) != 1 {
		t.Fatalf("key under custom/: %v %v", resp, err)
	}
	hs, err := l.List(ctx, "a/")
	if err != nil || len(hs) != 1 || hs[0].Name != "a/b c" || hs[0].Fence != ls.Fence() {
		t.Errorf("List(a/) = %+v, %v", hs, err)
	}
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestOpenRefused: Open of endpoints that refuse connections fails at
// once (well within a second), naming every endpoint and the cause.
func TestOpenRefused(t *testing.T) {
	a, b := testserver.FreePort(t), testserver.FreePort(t)
	raw := "etcd://127.0.0.1:" + itoa(a) + ",127.0.0.1:" + itoa(b)
	start := time.Now()
	l, err := dlock.Open(context.Background(), raw)
	took := time.Since(start)
	if err == nil {
		_ = l.Close()
		t.Fatal("Open of closed ports succeeded")
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
	for _, want := range []string{"127.0.0.1:" + itoa(a), "127.0.0.1:" + itoa(b), "connection refused"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q: %v", want, err)
		}
	}
	if took > time.Second {
		t.Errorf("Open took %s to find that nothing listens", took)
	}
}

// TestOpenFrozen: a member that accepts connections but answers nothing
// (SIGSTOP) fails Open within dial_timeout, with the endpoint and the
// cause; without dial_timeout, within DefaultDialTimeout.
func TestOpenFrozen(t *testing.T) {
	srv := testserver.Etcd(t)
	srv.Pause()
	defer srv.Resume()
	for _, tc := range []struct {
		query string
		bound time.Duration
	}{
		{"?dial_timeout=500ms", 500 * time.Millisecond},
		{"", etcdlock.DefaultDialTimeout},
	} {
		start := time.Now()
		l, err := dlock.Open(context.Background(), "etcd://"+srv.Endpoint+tc.query)
		took := time.Since(start)
		if err == nil {
			_ = l.Close()
			t.Fatalf("Open%s of a frozen member succeeded", tc.query)
		}
		t.Logf("Open%s after %s: %v", tc.query, took.Round(time.Millisecond), err)
		if !strings.Contains(err.Error(), srv.Endpoint) || !strings.Contains(err.Error(), "no answer within "+tc.bound.String()) {
			t.Errorf("Open%s: error does not name the endpoint and the timeout: %v", tc.query, err)
		}
		if took < tc.bound*9/10 || took > tc.bound+time.Second {
			t.Errorf("Open%s took %s, want about %s", tc.query, took, tc.bound)
		}
	}
}

// TestURLElectionTimeout: election_timeout sets the minimum TTL.
func TestURLElectionTimeout(t *testing.T) {
	srv := testserver.Etcd(t)
	for _, tc := range []struct {
		query string
		min   time.Duration
	}{
		{"", 8 * time.Second},
		{"?election_timeout=1s", 8 * time.Second},
		{"?election_timeout=250ms", 2 * time.Second},
		{"?election_timeout=100ms", 2 * time.Second},
		{"?election_timeout=1300ms", 11 * time.Second},
	} {
		l, err := dlock.Open(context.Background(), "etcd://"+srv.Endpoint+tc.query)
		if err != nil {
			t.Fatal(err)
		}
		if got := l.Capabilities().MinTTL; got != tc.min {
			t.Errorf("Open(...%s): MinTTL %s, want %s", tc.query, got, tc.min)
		}
		_ = l.Close()
	}
	for _, bad := range []string{"0", "-1s", "soon", "2m"} {
		_, err := dlock.Open(context.Background(), "etcd://"+srv.Endpoint+"?election_timeout="+bad)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), bad) {
			t.Errorf("election_timeout=%s: %v, want ErrInvalidArgument naming it", bad, err)
		}
	}
}
