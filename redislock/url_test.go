package redislock_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

func TestOpenURL(t *testing.T) {
	srv := testserver.Redis(t)
	ctx := ctxT(t)
	l, err := dlock.Open(ctx, srv.URL()+"?prefix=app:&dial_timeout=2s&ttl=5s")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	ls, err := l.TryAcquire(ctx, "open/url")
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	if ls.TTL() != 5*time.Second {
		t.Errorf("TTL = %s, want the URL's 5s", ls.TTL())
	}
	if n, err := client(t, srv.Addr).Exists(ctx, "app:{open/url}").Result(); err != nil || n != 1 {
		t.Errorf("key app:{open/url} exists = %d, %v; want the URL's prefix used", n, err)
	}
}

func TestOpenClusterURL(t *testing.T) {
	c := testserver.RedisCluster(t, 3)
	ctx := ctxT(t)
	for _, u := range []string{c.URL(), "redis://" + c.Addrs[1] + "?cluster=true"} {
		l, err := dlock.Open(ctx, u)
		if err != nil {
			t.Fatalf("Open(%s): %v", u, err)
		}
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			ls, err := l.TryAcquire(ctx, "cluster/"+name)
			if err != nil {
				t.Fatalf("%s: %v", u, err)
			}
			_ = ls.Release(ctx)
		}
		_ = l.Close()
	}
}

func TestOpenURLErrors(t *testing.T) {
	srv := testserver.Redis(t)
	bad := map[string]string{
		"?nosuchkey=1":                       "nosuchkey",
		"?replica_sync=two":                  "replica_sync",
		"?replica_sync=-1":                   "replica_sync",
		"?replica_timeout=soon":              "replica_timeout",
		"?replica_timeout=0s":                "replica_timeout",
		"?replica_timeout=2m":                "replica_timeout",
		"?replica_sync=65":                   "replica_sync",
		"?prefix=":                           "prefix is empty",
		"?prefix=" + strings.Repeat("p", 65): "prefix",
		"?cluster=maybe":                     "cluster",
		"?context_timeout_enabled=maybe":     "context_timeout_enabled",
		"?dial_timeout=forever":              "dial_timeout",
		"/notadb":                            "database",
	}
	for suffix, want := range bad {
		_, err := dlock.Open(ctxT(t), srv.URL()+suffix)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%s) = %v, want ErrInvalidArgument naming %q", suffix, err, want)
		}
	}
}

func TestWrongPassword(t *testing.T) {
	const secret = "s3cr3t-Pa55word"
	srv := testserver.Redis(t, "--requirepass", "right-one")
	ctx := ctxT(t)
	for _, u := range []string{
		"redis://:" + secret + "@" + srv.Addr,
		"redis://default:" + secret + "@" + srv.Addr + "?nosuchkey=1",
	} {
		_, err := dlock.Open(ctx, u)
		if err == nil {
			t.Fatalf("Open with a wrong password succeeded")
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
		t.Logf("wrong password: %v", err)
	}
	_, err := dlock.Open(ctx, "redis://:"+secret+"@"+srv.Addr)
	if !strings.Contains(err.Error(), "WRONGPASS") {
		t.Errorf("error %q does not say the password was refused", err)
	}
	l, err := dlock.Open(ctx, "redis://:right-one@"+srv.Addr)
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	_ = l.Close()
}

// TestOpenAtPostgres: a redis:// URL at a PostgreSQL port says so; it
// said "redislock: connect: EOF" (PostgreSQL closes the connection on a
// first message it cannot read).
func TestOpenAtPostgres(t *testing.T) {
	pg := testserver.Postgres(t)
	addr := fmt.Sprintf("127.0.0.1:%d", pg.Port)
	_, err := dlock.Open(ctxT(t), "redis://:s3cr3t-pw@"+addr)
	want := "redislock: the server at " + addr + " did not answer as Redis (it answered like PostgreSQL: is this a postgres:// address?)"
	if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("Open: %v\nwant it to say %q, without the password", err, want)
	}
}
