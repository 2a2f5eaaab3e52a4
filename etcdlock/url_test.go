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
	"github.com/dlockdev/dlock/internal/testserver"
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
