package mysqllock_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/mysqllock"
)

// TestOpenURL: a URL opens with exactly the settings it names, under
// either scheme.
func TestOpenURL(t *testing.T) {
	d := newDB(t)
	for _, tc := range []struct{ url, mode, table string }{
		{d.url, "lease", "dlock_leases"},
		{strings.Replace(d.url, "mysql://", "mariadb://", 1) + "?mode=get_lock", "get_lock", "dlock_leases"},
		{d.url + "?table=other_locks&timeout=5s", "lease", "other_locks"},
	} {
		l, err := dlock.Open(ctx(t), tc.url)
		if err != nil {
			t.Fatalf("Open(%s): %v", tc.url, err)
		}
		s := l.Settings()
		if s["mode"] != tc.mode || s["table"] != tc.table {
			t.Errorf("Open(%s): mode %q table %q, want %q %q", tc.url, s["mode"], s["table"], tc.mode, tc.table)
		}
		_ = l.Close()
	}
}

// TestOpenBadURL: an unknown, repeated or malformed setting is an error
// naming it, never a silent default.
func TestOpenBadURL(t *testing.T) {
	srv := testserver.MariaDB(t)
	base := srv.URL("db1")
	for _, tc := range []struct{ url, want string }{
		{base + "?mode=getlock", `did you mean get_lock?`},
		{base + "?mode=", `mode is empty`},
		{base + "?mode=lease&mode=get_lock", `"mode" is given 2 times`},
		{base + "?mode=get_lock;x", `has a ';'`},
		{base + "?table=Bad-Name", `table "Bad-Name"`},
		{base + "?table=" + strings.Repeat("t", 60), `at most 56`},
		{base + "?dlock_ttl=1s", `unknown URL query key "dlock_ttl"`},
		{base + "?nosuchsetting=1", `nosuchsetting`},
		{srv.URL(""), `names no database`},
		{base + "?timeout=soon", `timeout`},
	} {
		l, err := dlock.Open(ctx(t), tc.url)
		if err == nil {
			_ = l.Close()
			t.Errorf("Open(%s) succeeded", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%s): %v\nwant it to say %s", tc.url, err, tc.want)
		}
	}
}

// TestOpenBadCredentials: a wrong password fails at Open with an error
// that names the user and never shows the password.
func TestOpenBadCredentials(t *testing.T) {
	srv := testserver.MariaDB(t)
	db := srv.NewDatabase(t)
	const secret = "s3cr3t-pa55"
	_, err := dlock.Open(ctx(t), srv.AuthURL(db, secret))
	if err == nil {
		t.Fatal("Open with a wrong password succeeded")
	}
	t.Logf("wrong password: %v", err)
	if strings.Contains(err.Error(), secret) {
		t.Errorf("error shows the password: %v", err)
	}
	if !strings.Contains(err.Error(), "dlock_auth") {
		t.Errorf("error does not name the user dlock_auth: %v", err)
	}
	l, err := dlock.Open(ctx(t), srv.AuthURL(db, srv.Password))
	if err != nil {
		t.Fatalf("Open with the right password: %v", err)
	}
	_ = l.Close()
}

// TestModeInConfig: a bad mode or table in a Config is an invalid
// argument, and a nil *sql.DB too.
func TestModeInConfig(t *testing.T) {
	if _, err := (mysqllock.Config{Mode: "advisory"}).Driver(newDB(t).sql); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("mode advisory: %v, want ErrInvalidArgument", err)
	}
	if _, err := mysqllock.New(nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("New(nil): %v, want ErrInvalidArgument", err)
	}
}
