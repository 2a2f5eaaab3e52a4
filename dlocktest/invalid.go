package dlocktest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// testInvalidArguments checks that every kind of bad input is an error
// wrapping ErrInvalidArgument, from every entry point, and never a panic,
// a hang or a silent default.
func (s *suite) testInvalidArguments(t *testing.T) {
	l := s.locker(t)
	good := s.name(t)
	cases := []struct {
		what string
		name string
		opts []dlock.Option
	}{
		{"empty name", "", nil},
		{"name longer than MaxNameLen", strings.Repeat("n", dlock.MaxNameLen+1), nil},
		{"name with a control character", "bad\x00name", nil},
		{"TTL under MinTTL", good, []dlock.Option{dlock.WithTTL(dlock.MinTTL - time.Millisecond)}},
		{"TTL zero", good, []dlock.Option{dlock.WithTTL(0)}},
		{"TTL over MaxTTL", good, []dlock.Option{dlock.WithTTL(dlock.MaxTTL + time.Second)}},
		{"negative wait", good, []dlock.Option{dlock.WithWait(-time.Second)}},
		{"bad backoff", good, []dlock.Option{dlock.WithBackoff(0, time.Second)}},
		{"empty owner", good, []dlock.Option{dlock.WithOwner("")}},
	}
	for _, c := range cases {
		s.expectInvalid(t, l, c.what, c.name, c.opts)
	}
	s.expectInvalid(t, nil, "nil Locker", good, nil)
	closed := s.h.New(t)
	if err := closed.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	s.expectInvalid(t, closed, "closed Locker", good, nil)
	s.checkInvalidRefresh(t, l)
	s.checkLongestName(t, l)
}

// expectInvalid tries every acquiring entry point with bad input.
func (s *suite) expectInvalid(t *testing.T, l *dlock.Locker, what, name string, opts []dlock.Option) {
	t.Helper()
	ctx := s.ctx(t)
	opts = append(s.opts(dlock.WithWait(time.Second)), opts...)
	check := func(entry string, err error) {
		t.Helper()
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("%s with %s: err = %v, want ErrInvalidArgument", entry, what, err)
		}
	}
	_, err := l.Acquire(ctx, name, opts...)
	check("Acquire", err)
	_, err = l.TryAcquire(ctx, name, opts...)
	check("TryAcquire", err)
	_, err = l.AcquireAll(ctx, []string{name}, opts...)
	check("AcquireAll", err)
	err = dlock.Do(ctx, l, name, func(context.Context, *dlock.Lease) error {
		t.Errorf("Do ran fn with %s", what)
		return nil
	}, opts...)
	check("Do", err)
}

// checkInvalidRefresh checks Lease.Refresh's TTL validation and AcquireAll
// and Do's own argument checks.
func (s *suite) checkInvalidRefresh(t *testing.T, l *dlock.Locker) {
	ls := s.acquire(t, l, s.name(t, "refresh"), dlock.WithTTL(s.longTTL()))
	defer release(t, ls)
	for _, ttl := range []time.Duration{0, dlock.MinTTL - 1, dlock.MaxTTL + 1} {
		if err := ls.Refresh(s.ctx(t), ttl); !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Errorf("Refresh(%s) = %v, want ErrInvalidArgument", ttl, err)
		}
	}
	if err := ls.Err(); err != nil {
		t.Errorf("an invalid Refresh ended the lease: %v", err)
	}
	if _, err := l.AcquireAll(s.ctx(t), nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("AcquireAll(nil) = %v, want ErrInvalidArgument", err)
	}
	if err := dlock.Do(s.ctx(t), l, s.name(t, "do"), nil); !errors.Is(err, dlock.ErrInvalidArgument) {
		t.Errorf("Do(nil fn) = %v, want ErrInvalidArgument", err)
	}
}

// checkLongestName checks that a name of exactly MaxNameLen bytes works:
// the limit is the portable one, and backends must honour it.
func (s *suite) checkLongestName(t *testing.T, l *dlock.Locker) {
	prefix := s.name(t) + "/"
	name := prefix + strings.Repeat("x", dlock.MaxNameLen-len(prefix))
	ls, err := l.TryAcquire(s.ctx(t), name, s.opts()...)
	if err != nil {
		t.Fatalf("TryAcquire(name of MaxNameLen bytes): %v", err)
	}
	release(t, ls)
}
