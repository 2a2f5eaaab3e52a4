package zklock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/go-zookeeper/zk"
)

// TestBadURLs: malformed zk URLs fail at Open with ErrInvalidArgument and
// an error naming the bad part, without contacting any server, and never
// show the password.
func TestBadURLs(t *testing.T) {
	for raw, want := range map[string]string{
		"zk://":                                   "no server",
		"zk://h:99999":                            `port "99999"`,
		"zk://h:2181,:2181":                       `server ":2181"`,
		"zk://h:2181/":                            "",
		"zk://h:2181/a//b":                        `"/a//b"`,
		"zk://h:2181/zookeeper":                   `"/zookeeper"`,
		"zk://h:2181?session_timeout=soon":        `session_timeout="soon"`,
		"zk://h:2181?dial_timeout=-1s":            `dial_timeout="-1s"`,
		"zk://h:2181?prefix=x":                    `unknown query key "prefix"`,
		"zk://u:s3cret@h:2181?session_timeout=0s": `session_timeout="0s"`,
	} {
		if want == "" {
			continue // valid: covered by the tests that open a server
		}
		_, err := dlock.Open(context.Background(), raw)
		if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) = %v, want ErrInvalidArgument naming %s", raw, err, want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Open(%q) error shows the password: %v", raw, err)
		}
	}
}

// TestUnreachable: an ensemble nobody answers on fails Open within
// dial_timeout, naming the servers, instead of hanging.
func TestUnreachable(t *testing.T) {
	addr := "127.0.0.1:" + itoa(testserver.FreePort(t))
	start := time.Now()
	_, err := dlock.Open(context.Background(), "zk://"+addr+"?dial_timeout=1s")
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "no session") {
		t.Fatalf("Open of an unreachable ensemble = %v, want an error naming %s", err, addr)
	}
	if took > 5*time.Second {
		t.Errorf("Open took %s with dial_timeout=1s", took)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := dlock.Open(ctx, "zk://"+addr); err == nil || time.Since(start) > 3*time.Second {
		t.Errorf("Open bounded by a 300ms context = %v after %s", err, time.Since(start))
	}
}

// TestProtectedRoot: a root whose ACL refuses the session fails Open with
// a permanent error naming the root and the missing credentials; with the
// credentials it works, and the Locker's nodes are the user's own.
func TestProtectedRoot(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	admin := connect(t, srv.Addr)
	if _, err := admin.Create("/secure", nil, zk.FlagPersistent, zk.DigestACL(zk.PermAll, "app", "s3cret")); err != nil {
		t.Fatal(err)
	}
	_, err := dlock.Open(context.Background(), srv.URL()+"/secure/locks")
	if !errors.Is(err, driver.ErrPermanent) || !strings.Contains(err.Error(), "/secure") || !strings.Contains(err.Error(), "credentials") {
		t.Fatalf("Open of a protected root without credentials = %v, want a permanent error naming it", err)
	}
	_, err = dlock.Open(context.Background(), "zk://app:wrong@"+srv.Addr+"/secure/locks")
	if !errors.Is(err, driver.ErrPermanent) || strings.Contains(err.Error(), "wrong") {
		t.Fatalf("Open with wrong credentials = %v, want a permanent error without the password", err)
	}
	l, err := dlock.Open(context.Background(), "zk://app:s3cret@"+srv.Addr+"/secure/locks")
	if err != nil {
		t.Fatalf("Open with the credentials: %v", err)
	}
	defer l.Close()
	ls, err := l.Acquire(context.Background(), "x")
	if err != nil {
		t.Fatalf("Acquire under the protected root: %v", err)
	}
	if _, ok, err := l.Inspect(context.Background(), "x"); err != nil || !ok {
		t.Errorf("Inspect: held %v, %v", ok, err)
	}
	_ = ls.Release(context.Background())
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestDiagnose: a standalone server and a world-writable root are both
// reported as warnings, with a fix.
func TestDiagnose(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	l := locker(t, srv.Addr)
	if _, err := l.Acquire(context.Background(), "diagnose"); err != nil { // creates the root
		t.Fatal(err)
	}
	d, ok := l.Driver().(driver.Diagnoser)
	if !ok {
		t.Fatal("zklock does not implement driver.Diagnoser")
	}
	fs, err := d.Diagnose(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fs {
		t.Logf("%s: %s (%s) %s", f.Check, f.Verdict, f.Detail, f.Fix)
		if f.Verdict != driver.VerdictWarn || f.Fix == "" {
			t.Errorf("%s: verdict %s, want a warning with a fix", f.Check, f.Verdict)
		}
	}
	if len(fs) != 2 {
		t.Errorf("%d findings, want 2", len(fs))
	}
}
