package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// TestInvalidArguments: every bad input is an error wrapping
// ErrInvalidArgument that names the value; nothing panics.
func TestInvalidArguments(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	long := strings.Repeat("n", dlock.MaxNameLen+1)
	cases := []struct {
		what, name, mention string
		opts                []dlock.Option
	}{
		{"empty name", "", "empty", nil},
		// A blank name shows as nothing in dlock ls and the dashboard, and
		// a name variable that came out blank is granted as a lock.
		{"space name", " ", `" " is only whitespace`, nil},
		{"whitespace name", "\u00a0\u2003\u3000", `"\u00a0\u2003\u3000" is only whitespace`, nil},
		{"long name", long, "513 bytes", nil},
		{"control char", "a\nb", `"a\nb"`, nil},
		{"invalid UTF-8", "a\xffb", `"a\xffb"`, nil},
		{"ttl too small", "x", "9ms", []dlock.Option{dlock.WithTTL(9 * time.Millisecond)}},
		{"ttl too large", "x", "24h0m1s", []dlock.Option{dlock.WithTTL(24*time.Hour + time.Second)}},
		{"negative ttl", "x", "-1s", []dlock.Option{dlock.WithTTL(-time.Second)}},
		{"negative wait", "x", "-1ms", []dlock.Option{dlock.WithWait(-time.Millisecond)}},
		{"zero backoff", "x", "min 0s", []dlock.Option{dlock.WithBackoff(0, time.Second)}},
		{"inverted backoff", "x", "max 1ms", []dlock.Option{dlock.WithBackoff(time.Second, time.Millisecond)}},
		{"empty owner", "x", `owner ""`, []dlock.Option{dlock.WithOwner("")}},
		{"long owner", "x", "256 bytes", []dlock.Option{dlock.WithOwner(strings.Repeat("o", 257))}},
		{"control owner", "x", `"o\to"`, []dlock.Option{dlock.WithOwner("o\to")}},
		{"blank owner", "x", `owner "  " is only whitespace`, []dlock.Option{dlock.WithOwner("  ")}},
		// A right-to-left override makes "job\u202egnp.exe" display as
		// "jobexe.png": one name shown as another in dlock ls and the
		// dashboard.
		{"bidi override in a name", "job\u202egnp.exe", `\u202e`, nil},
		{"bidi isolate in a name", "a\u2067b", `\u2067`, nil},
		{"line separator in a name", "a\u2028b", `\u2028`, nil},
		{"bidi override in an owner", "x", `\u202e`, []dlock.Option{dlock.WithOwner("host\u202e1")}},
		{"huge owner is not echoed whole", "x", `oooo"…`, []dlock.Option{dlock.WithOwner(strings.Repeat("o", 60<<10))}},
	}
	for _, c := range cases {
		t.Run(c.what, func(t *testing.T) {
			_, err := l.Acquire(ctx, c.name, c.opts...)
			expectInvalid(t, "Acquire", err, c.mention)
			_, err = l.TryAcquire(ctx, c.name, c.opts...)
			expectInvalid(t, "TryAcquire", err, c.mention)
			_, err = l.AcquireAll(ctx, []string{"ok", c.name}, c.opts...)
			expectInvalid(t, "AcquireAll", err, c.mention)
			err = dlock.Do(ctx, l, c.name, func(context.Context, *dlock.Lease) error { return nil }, c.opts...)
			expectInvalid(t, "Do", err, c.mention)
			_, err = dlock.NewLocker(l.Driver(), c.opts...)
			if c.opts != nil {
				expectInvalid(t, "NewLocker", err, c.mention)
			}
		})
	}
}

func expectInvalid(t *testing.T, what string, err error, mention string) {
	t.Helper()
	if !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("%s: err = %v, want ErrInvalidArgument", what, err)
		return
	}
	if !strings.Contains(err.Error(), mention) {
		t.Errorf("%s: err %q does not name the bad value (%s)", what, err, mention)
	}
	if len(err.Error()) > 2*dlock.MaxNameLen+200 {
		t.Errorf("%s: err is %d bytes: a rejected value is echoed whole", what, len(err.Error()))
	}
}

// TestNilAndClosedLocker: every method of a nil or closed Locker returns
// ErrInvalidArgument instead of panicking.
func TestNilAndClosedLocker(t *testing.T) {
	closed, _ := newMem(t)
	if err := closed.Close(); err != nil {
		t.Fatal(err)
	}
	if err := closed.Close(); err != nil {
		t.Errorf("second Close = %v, want nil (idempotent)", err)
	}
	for what, l := range map[string]*dlock.Locker{"nil Locker": nil, "Locker is closed": closed} {
		ctx := context.Background()
		_, err := l.Acquire(ctx, "x")
		expectInvalid(t, "Acquire", err, what)
		_, err = l.TryAcquire(ctx, "x")
		expectInvalid(t, "TryAcquire", err, what)
		_, err = l.AcquireAll(ctx, []string{"x"})
		expectInvalid(t, "AcquireAll", err, what)
		err = dlock.Do(ctx, l, "x", func(context.Context, *dlock.Lease) error { return nil })
		expectInvalid(t, "Do", err, what)
		_, _, err = l.Inspect(ctx, "x")
		expectInvalid(t, "Inspect", err, what)
		_, err = l.List(ctx, "")
		expectInvalid(t, "List", err, what)
		_, _, _, err = l.ForceRelease(ctx, "x")
		expectInvalid(t, "ForceRelease", err, what)
		expectInvalid(t, "Migrate", l.Migrate(ctx), what)
	}
	expectInvalid(t, "Close", (*dlock.Locker)(nil).Close(), "nil Locker")
	_, err := dlock.NewLocker(nil)
	expectInvalid(t, "NewLocker", err, "nil driver")
}

// TestOtherInvalidArguments covers the remaining entry points.
func TestOtherInvalidArguments(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	_, err := l.AcquireAll(ctx, nil)
	expectInvalid(t, "AcquireAll(nil)", err, "at least one name")
	expectInvalid(t, "Do(nil fn)", dlock.Do(ctx, l, "x", nil), "nil function")
	ls, err := l.Acquire(ctx, "x", dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	expectInvalid(t, "Refresh(0)", ls.Refresh(ctx, 0), "0s")
	expectInvalid(t, "Refresh(25h)", ls.Refresh(ctx, 25*time.Hour), "25h")
	if ls.Err() != nil {
		t.Errorf("an invalid Refresh ended the lease: %v", ls.Err())
	}
	_, _, err = l.Inspect(ctx, "")
	expectInvalid(t, "Inspect(\"\")", err, "empty")
	_, _, _, err = l.ForceRelease(ctx, "")
	expectInvalid(t, "ForceRelease(\"\")", err, "empty")
	for _, blank := range []string{" ", "\u2003"} {
		expectInvalid(t, "CheckName(blank)", dlock.CheckName(blank), "only whitespace")
		_, _, err = l.Inspect(ctx, blank)
		expectInvalid(t, "Inspect(blank)", err, "only whitespace")
		_, _, _, err = l.ForceRelease(ctx, blank)
		expectInvalid(t, "ForceRelease(blank)", err, "only whitespace")
		_, err = l.Semaphore(blank, 2)
		expectInvalid(t, "Semaphore(blank)", err, "only whitespace")
		_, err = l.Election(blank)
		expectInvalid(t, "Election(blank)", err, "only whitespace")
		_, err = l.RWMutex(blank)
		expectInvalid(t, "RWMutex(blank)", err, "only whitespace")
	}
}

// TestBoundaryValues: the limits themselves are valid.
func TestBoundaryValues(t *testing.T) {
	l, _ := newMem(t)
	ctx := context.Background()
	for _, name := range []string{strings.Repeat("n", dlock.MaxNameLen), "ünïcode/名前", "x"} {
		for _, ttl := range []time.Duration{dlock.MinTTL, dlock.MaxTTL} {
			ls, err := l.TryAcquire(ctx, name, dlock.WithTTL(ttl), dlock.WithAutoRefresh(false))
			if err != nil {
				t.Fatalf("TryAcquire(%d-byte name, ttl %s): %v", len(name), ttl, err)
			}
			_ = ls.Release(ctx)
		}
	}
}

// capsDriver is memlock with etcd-like capabilities: leases of whole
// seconds, at least 2 s.
type capsDriver struct{ *countingDriver }

func (capsDriver) Capabilities() driver.Capabilities {
	return driver.Capabilities{MinTTL: 2 * time.Second, TTLGranularity: time.Second}
}

// TestBackendTTLLimits: the backend's minimum TTL and granularity apply to
// acquire options and to Lease.Refresh alike.
func TestBackendTTLLimits(t *testing.T) {
	l := wrap(t, capsDriver{newCounting(t, newStore())})
	defer l.Close()
	ctx := context.Background()
	_, err := l.TryAcquire(ctx, "x", dlock.WithTTL(time.Second))
	expectInvalid(t, "TryAcquire(1s)", err, "minimum 2s")
	ls, err := l.TryAcquire(ctx, "x", dlock.WithTTL(2500*time.Millisecond), dlock.WithAutoRefresh(false))
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx)
	if ls.TTL() != 3*time.Second {
		t.Errorf("TTL = %s, want 2.5s rounded up to 3s", ls.TTL())
	}
	expectInvalid(t, "Refresh(1s)", ls.Refresh(ctx, time.Second), "minimum 2s")
	if err := ls.Refresh(ctx, 4200*time.Millisecond); err != nil || ls.TTL() != 5*time.Second {
		t.Errorf("Refresh(4.2s) = %v, TTL %s; want nil, 5s", err, ls.TTL())
	}
}
