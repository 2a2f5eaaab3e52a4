package redlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/redis/go-redis/v9"
)

// closedAddr is a loopback address on which nothing listens.
func closedAddr(t *testing.T) string {
	return fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
}

// TestRefusedNodeNamed: a node that refuses connections is reported by
// its address and "connection refused", not as a node that did not answer
// in time (go-redis retries a failed dial in the background, so the
// request itself sees only its deadline), and the URL's password is never
// printed.
func TestRefusedNodeNamed(t *testing.T) {
	const password = "s3cret-pw"
	a := testserver.Redis(t, "--requirepass", password)
	b := testserver.Redis(t, "--requirepass", password)
	dead := closedAddr(t)
	// A foreign holder on b: with a granting, b naming a holder and the
	// dead node failing, no majority is possible and the holder alone
	// does not decide it, so the attempt reports the dead node's error.
	admin := redis.NewClient(&redis.Options{Addr: b.Addr, Password: password})
	t.Cleanup(func() { _ = admin.Close() })
	if err := admin.Set(t.Context(), layout.Lock("refused"), "thief-token\n1\nthief", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	u := fmt.Sprintf("redlock://:%s@%s,%s,%s?node_timeout=300ms", password, a.Addr, b.Addr, dead)
	l, err := dlock.Open(t.Context(), u)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	_, err = l.TryAcquire(t.Context(), "refused")
	t.Logf("TryAcquire: %v", err)
	if !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("TryAcquire = %v, want ErrBackend", err)
	}
	msg := err.Error()
	if want := "redlock node " + dead + ": cannot connect: connection refused"; !strings.Contains(msg, want) {
		t.Errorf("error %q does not contain %q", msg, want)
	}
	if strings.Contains(msg, errNodeTimeout.Error()) {
		t.Errorf("error %q reports the refused node as a timeout", msg)
	}
	if strings.Contains(msg, password) {
		t.Errorf("error %q prints the password", msg)
	}
}

// TestNodeErrorsSeparated: the errors of several nodes are one line, each
// naming its node, separated by "; ", and each still matches errors.Is:
// here a refused connection and a node that wants a password.
func TestNodeErrorsSeparated(t *testing.T) {
	ns := startNodes(t, 1)
	locked := testserver.Redis(t, "--requirepass", "other-pw")
	dead := closedAddr(t)
	cs := []redis.UniversalClient{ns.admin[0]}
	for _, addr := range []string{locked.Addr, dead} {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		cs = append(cs, c)
	}
	l, err := Config{NodeTimeout: suiteNodeTimeout}.Locker(cs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	_, err = l.TryAcquire(context.Background(), "separated")
	t.Logf("TryAcquire: %v", err)
	if !errors.Is(err, dlock.ErrBackend) {
		t.Fatalf("TryAcquire = %v, want ErrBackend", err)
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") {
		t.Errorf("error %q spans several lines", msg)
	}
	for _, want := range []string{
		"redlock node " + locked.Addr + ": NOAUTH",
		"redlock node " + dead + ": cannot connect: connection refused",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not contain %q", msg, want)
		}
	}
	if strings.Count(msg, "; redlock node ") != 1 {
		t.Errorf(`error %q: want the two nodes' errors separated by "; "`, msg)
	}
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		t.Errorf("errors.As(%v, redis.Error) = false, want the NOAUTH reply", err)
	}
}
