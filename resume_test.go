package dlock_test

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// alter decodes handle, replaces old with new in its bytes, and encodes it
// again: a handle altered as someone holding it could alter it.
func alter(t *testing.T, handle, old, new string) string {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(handle)
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	if !strings.Contains(s, old) {
		t.Fatalf("handle does not carry %q", old)
	}
	return base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(s, old, new, 1)))
}

// TestResumeMalformedHandle: a malformed handle is an ErrInvalidArgument
// naming what is wrong, and no error quotes the handle or its token.
func TestResumeMalformedHandle(t *testing.T) {
	l, _ := newMem(t)
	ls, err := l.Acquire(context.Background(), "jobs", dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	h, tok := ls.Handle(), ls.Token()
	raw, _ := base64.RawURLEncoding.DecodeString(h)
	v2 := base64.RawURLEncoding.EncodeToString(append([]byte{2}, raw[1:]...))
	for _, c := range []struct{ name, handle, want string }{
		{"empty", "", "it is empty"},
		{"not base64", h[:10] + "*" + h[11:], "not URL-safe base64"},
		{"padded", h + "==", "not URL-safe base64"},
		{"another version", v2, "version 2"},
		{"cut short", base64.RawURLEncoding.EncodeToString(raw[:len(raw)-1]), "TTL is cut short"},
		{"trailing bytes", base64.RawURLEncoding.EncodeToString(append(raw, 0)), "1 bytes after the TTL"},
		{"token not hex", alter(t, h, tok, strings.Repeat("Z", 32)), "token is not 32 hex digits"},
		{"control in name", alter(t, h, "jobs", "jo\nb"), "its lock name"},
		{"unknown kind", alter(t, h, "jobs", "jo\x1fx"), `unknown kind "x"`},
		{"too long", strings.Repeat("A", 5000), "longer than the 4096"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := l.Resume(context.Background(), c.handle)
			if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Resume = %v, want ErrInvalidArgument saying %q", err, c.want)
			}
			if strings.Contains(err.Error(), tok) || (c.handle != "" && strings.Contains(err.Error(), c.handle)) {
				t.Fatalf("error quotes the handle or its token: %v", err)
			}
		})
	}
}

// TestResumeAlteredToken: a handle whose token was altered (to another
// valid token) is refused with ErrLost, and the holder keeps its lock.
func TestResumeAlteredToken(t *testing.T) {
	store := newStore()
	a, b := memLocker(t, store), memLocker(t, store)
	ls, err := a.Acquire(context.Background(), "jobs", dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	forged := alter(t, ls.Handle(), ls.Token(), strings.Repeat("0", 32))
	if got, err := b.Resume(context.Background(), forged); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Resume with another token = %v, %v; want ErrLost", got, err)
	}
	if err := ls.Refresh(context.Background(), time.Hour); err != nil {
		t.Fatalf("holder's Refresh after a forged handle was refused: %v", err)
	}
	if _, err := b.Resume(context.Background(), ls.Handle()); err != nil {
		t.Fatalf("Resume of an intact handle: %v", err)
	}
}

// TestResumeOtherBackend: a handle made on one backend is an
// ErrInvalidArgument on a Locker of another, naming both.
func TestResumeOtherBackend(t *testing.T) {
	l, store := newMem(t)
	ls, err := l.Acquire(context.Background(), "jobs", dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other := wrap(t, newCounting(t, store))
	defer other.Close()
	_, err = other.Resume(context.Background(), ls.Handle())
	if !errors.Is(err, dlock.ErrInvalidArgument) || !strings.Contains(err.Error(), "memlock") {
		t.Fatalf("Resume on another backend = %v, want ErrInvalidArgument naming memlock", err)
	}
}

// TestResumeUnsupported: a driver without driver.Adopter refuses with
// ErrUnsupported, naming the backend.
func TestResumeUnsupported(t *testing.T) {
	store := newStore()
	a, b := wrap(t, newCounting(t, store)), wrap(t, newCounting(t, store))
	defer a.Close()
	defer b.Close()
	ls, err := a.Acquire(context.Background(), "jobs", dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resume(context.Background(), ls.Handle()); !errors.Is(err, dlock.ErrUnsupported) {
		t.Fatalf("Resume on a driver without Adopter = %v, want ErrUnsupported", err)
	}
	if err := b.CanResume(); !errors.Is(err, dlock.ErrUnsupported) || !strings.Contains(err.Error(), "cannot") {
		t.Fatalf("CanResume on a driver without Adopter = %v, want ErrUnsupported saying why", err)
	}
	mem, err := dlock.Open(context.Background(), "mem://can-resume")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	if err := mem.CanResume(); err != nil {
		t.Fatalf("CanResume on memlock = %v, want nil", err)
	}
}

// TestResumeExpiresFromNow: an adopted lease's expiry counts from when
// the adopting request was sent, not from the original grant, and its
// TTL is the handle's unless WithTTL says otherwise.
func TestResumeExpiresFromNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := newStore()
		a, b := memLocker(t, store), memLocker(t, store)
		ls, err := a.Acquire(context.Background(), "jobs", dlock.WithTTL(time.Hour), dlock.WithAutoRefresh(false))
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Minute)
		got, err := b.Resume(context.Background(), ls.Handle())
		if err != nil {
			t.Fatal(err)
		}
		if want := time.Now().Add(time.Hour - driver.ClockDrift(time.Hour)); !got.Expires().Equal(want) || got.TTL() != time.Hour {
			t.Errorf("adopted lease: TTL %v, Expires %v; want 1h and %v", got.TTL(), got.Expires(), want)
		}
		short, err := b.Resume(context.Background(), ls.Handle(), dlock.WithTTL(time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if short.TTL() != time.Minute {
			t.Errorf("Resume WithTTL(1m): TTL %v", short.TTL())
		}
		_ = short.Release(context.Background())
		_ = ls.Release(context.Background())
	})
}

// TestLeaseNeverPrintsItsToken: a lease printed with %v, %+v, %#v or
// %s shows its kind, name and fence, never its token or handle.
func TestLeaseNeverPrintsItsToken(t *testing.T) {
	l, _ := newMem(t)
	ls, err := l.Acquire(context.Background(), "jobs", dlock.WithTTL(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		s := fmt.Sprintf(verb, ls)
		if strings.Contains(s, ls.Token()) || strings.Contains(s, ls.Handle()) || !strings.Contains(s, `mutex "jobs" (fence 1)`) {
			t.Errorf("%s of a lease = %q", verb, s)
		}
	}
}

// TestHandOnHooks: hooks see a detached lease end as EndDetached, and a
// resumed lease as an acquire of its kind, its end as any other's.
func TestHandOnHooks(t *testing.T) {
	store := newStore()
	a, b := memLocker(t, store), memLocker(t, store)
	var log hookLog
	a.AddHooks(log.hooks())
	b.AddHooks(log.hooks())
	ctx := context.Background()
	ls, err := a.Acquire(ctx, "jobs", dlock.WithTTL(time.Hour), dlock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	h, err := ls.Detach()
	if err != nil {
		t.Fatal(err)
	}
	adopted, err := b.Resume(ctx, h, dlock.WithWait(0))
	if err != nil {
		t.Fatal(err)
	}
	if err := adopted.Release(ctx); err != nil {
		t.Fatal(err)
	}
	wantLines(t, log.take(),
		"acquiring memlock mutex jobs wait=0s", "done jobs acquired marked=true fence=1", "ended jobs detached",
		"acquiring memlock mutex jobs wait=0s", "done jobs acquired marked=true fence=1", "ended jobs released")
}
