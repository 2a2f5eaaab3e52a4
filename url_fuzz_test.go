package dlock_test

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/backends"
)

// unreachable replaces the host of every network URL the fuzzer makes: a
// closed port on loopback, so that a driver's connection check fails at
// once and the fuzz body never reaches a real server. (The drivers export
// no parse step of their own; Open parses, then dials.)
const unreachable = "127.0.0.1:1"

// openBound is how long Open may take, against a 300ms deadline, before
// the fuzzer calls it a hang. It is generous: today etcd Open with a user
// and password ignores the deadline and takes its own 5 s dial timeout
// (reported for etcdlock's owner; the fuzz corpus leaves that URL out so
// that the root tests stay fast).
const openBound = 10 * time.Second

// FuzzOpen feeds URLs to dlock.Open with every backend registered. Open
// must not panic, must return a Locker or an error, and must never echo a
// password it was given. Its seed corpus runs as a normal test.
func FuzzOpen(f *testing.F) {
	for _, s := range []string{
		"mem://fuzz", "mem://fuzz?ttl=1s&wait=0s&owner=me", "mem://x?ttl=-1s", "mem://x?ttl=banana",
		"redis://:s3cretPW@h:6379/0?replica_sync=1", "redis://u:s3cretPW@h?addr=h2:1&prefix=p",
		"rediss://h?dial_timeout=1ms&fair=maybe", "redlock://h1,h2,h3?quorum=2",
		"postgres://u:s3cretPW@h/db?mode=advisory&sslmode=disable", "postgresql://h/db?dlock_x=1&table=a.b",
		"postgres://h/db?mode=", "etcd://h1:2379,h2:2379?prefix=p/&dial_timeout=10ms",
		"file:///dev/null/x.db", "nope://x", "://", "redis://%zz",
		"mem://\x00", "", "postgres://u:p%40ss@h/db?password=s3cretPW2",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		u, err := url.Parse(raw)
		if err == nil && u.Scheme == "file" {
			t.Skip("file URLs create files") // filelock has its own tests
		}
		if raw == "" {
			t.Skip("empty means DLOCK_URL or the default file")
		}
		if err == nil && u.Host != "" {
			u.Host = unreachable
			raw = u.String()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		type opened struct {
			l   *dlock.Locker
			err error
		}
		done := make(chan opened, 1)
		go func() {
			l, err := dlock.Open(ctx, raw)
			done <- opened{l, err}
		}()
		var o opened
		select {
		case o = <-done:
		case <-time.After(openBound):
			t.Fatalf("Open(%q) did not return within %s (deadline 300ms)", raw, openBound)
		}
		l, err := o.l, o.err
		if err == nil {
			_ = l.Close()
			return
		}
		for _, secret := range secrets(raw) {
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("Open(%q) error echoes the password %q: %v", raw, secret, err)
			}
		}
		if errors.Is(err, dlock.ErrInvalidArgument) && strings.TrimSpace(err.Error()) == "" {
			t.Fatalf("Open(%q): empty error message", raw)
		}
	})
}

// secrets returns the passwords in raw that are long and distinctive
// enough that their appearance in an error can only be an echo.
func secrets(raw string) []string {
	u, err := url.Parse(raw)
	if err != nil {
		return nil
	}
	var out []string
	if p, ok := u.User.Password(); ok {
		out = append(out, p)
	}
	for _, k := range []string{"password", "pass"} {
		if p := u.Query().Get(k); p != "" {
			out = append(out, p)
		}
	}
	rest := u.Host + u.Path + u.User.Username()
	var keep []string
	for _, s := range out {
		if len(s) >= 6 && !strings.Contains(rest, s) {
			keep = append(keep, s)
		}
	}
	return keep
}
