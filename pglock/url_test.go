package pglock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
)

func TestOpenModes(t *testing.T) {
	url := newDB(t).url
	for _, tc := range []struct {
		query   string
		session bool
	}{{"", false}, {"&mode=lease", false}, {"&mode=advisory", true}} {
		for _, scheme := range []string{"postgres://", "postgresql://"} {
			u := scheme + strings.TrimPrefix(url, "postgres://") + tc.query
			l, err := dlock.Open(ctx(t), u)
			if err != nil {
				t.Fatalf("Open(%s): %v", u, err)
			}
			if got := l.Capabilities().SessionBound; got != tc.session {
				t.Errorf("Open(%s): SessionBound %v, want %v", u, got, tc.session)
			}
			_, notifies := l.Driver().(driver.Notifier)
			_, queues := l.Driver().(driver.Queuer)
			if notifies == queues {
				t.Errorf("Open(%s): driver notifies %v, queues %v; want one of them", u, notifies, queues)
			}
			ls, err := l.Acquire(ctx(t), "open-"+tc.query)
			if err != nil {
				t.Errorf("Open(%s): Acquire: %v", u, err)
			} else {
				_ = ls.Release(ctx(t))
			}
			_ = l.Close()
		}
	}
}

func TestOpenInvalid(t *testing.T) {
	url := newDB(t).url
	for _, q := range []string{"&mode=bogus", "&mode=", "&table=Bad-Name", "&table=a.b.c", "&table=" + strings.Repeat("x", 64), "&dlock_table=x"} {
		l, err := dlock.Open(ctx(t), url+q)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%s) succeeded", q)
			continue
		}
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Open(%s) = %v, want ErrInvalidArgument", q, err)
		}
	}
	if _, err := (pglock.Config{Mode: "x"}).Driver(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Driver(nil pool) = %v, want ErrInvalidArgument", err)
	}
}

// TestOpenBadCredentials checks that a wrong password or an unreachable
// server fails at Open with a clear error that never shows the password.
func TestOpenBadCredentials(t *testing.T) {
	srv := testserver.Postgres(t)
	const secret = "s3cr3t-pa55"
	for _, u := range []string{
		srv.AuthURL("postgres", secret),
		"postgres://dlock:" + secret + "@127.0.0.1:1/postgres?sslmode=disable&connect_timeout=5",
		"postgres://dlock:" + secret + "@127.0.0.1:5432/postgres?sslmode=disable&pool_max_conns=zero",
	} {
		l, err := dlock.Open(ctx(t), u)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%s) succeeded", dlock.Redact(u))
			continue
		}
		t.Logf("Open(%s): %v", dlock.Redact(u), err)
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error shows the password: %v", err)
		}
	}
	l, err := dlock.Open(ctx(t), srv.AuthURL("postgres", srv.Password))
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	_ = l.Close()
}

// TestModeTypo: a mistyped mode names the mode it nearly is.
func TestModeTypo(t *testing.T) {
	_, err := dlock.Open(ctx(t), "postgres://127.0.0.1:1/db?mode=advsory")
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), `mode "advsory" (want "lease" or "advisory"); did you mean advisory?`) {
		t.Errorf("mode=advsory: %v, want ErrInvalidArgument with did you mean advisory?", err)
	}
}
