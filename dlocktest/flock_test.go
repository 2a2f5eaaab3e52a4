package dlocktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
)

// flockDriver is a tiny cross-process driver used only to test the suite's
// own child-process machinery: the lock table is a JSON file rewritten
// under flock(2), with wall-clock expiry (one host, so that is sound).
type flockDriver struct{ path string }

type flockEntry struct {
	Token, Owner string
	Fence        uint64
	Expires      int64 // unix nanoseconds
}

type flockTable struct {
	Holders map[string]flockEntry
	Fences  map[string]uint64
}

const flockScheme = "dlocktest-flock"

func init() {
	dlock.Register(flockScheme, func(_ context.Context, raw string) (driver.Driver, error) {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, err
		}
		return &flockDriver{path: u.Path}, nil
	})
}

// flockMu queues this process's operations fairly (sync.Mutex hands off
// to waiters in starvation mode); flock(2) alone is unfair, and 32 polling
// goroutines could starve a holder's refresh and release.
var flockMu sync.Mutex

// update runs fn on the table under an exclusive flock and saves it.
func (d *flockDriver) update(ctx context.Context, fn func(tb *flockTable, now int64) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	flockMu.Lock()
	defer flockMu.Unlock()
	f, err := os.OpenFile(d.path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		return err
	}
	tb := flockTable{Holders: map[string]flockEntry{}, Fences: map[string]uint64{}}
	if st, _ := f.Stat(); st.Size() > 0 {
		if err := json.NewDecoder(f).Decode(&tb); err != nil {
			return err
		}
	}
	now := time.Now().UnixNano()
	for n, e := range tb.Holders {
		if e.Expires <= now {
			delete(tb.Holders, n)
		}
	}
	if err := fn(&tb, now); err != nil {
		return err
	}
	b, _ := json.Marshal(tb)
	if err := f.Truncate(0); err != nil {
		return err
	}
	_, err = f.WriteAt(b, 0)
	return err
}

func (d *flockDriver) TryAcquire(ctx context.Context, req driver.Request) (g driver.Grant, err error) {
	err = d.update(ctx, func(tb *flockTable, now int64) error {
		e, held := tb.Holders[req.Name]
		if held && e.Token != req.Token {
			g.Holder = driver.Holder{Name: req.Name, Owner: e.Owner, Fence: e.Fence, TTL: time.Duration(e.Expires - now)}
			return nil
		}
		if !held {
			tb.Fences[req.Name]++
			e = flockEntry{Token: req.Token, Owner: req.Owner, Fence: tb.Fences[req.Name]}
		}
		e.Expires = now + int64(req.TTL)
		tb.Holders[req.Name] = e
		g = driver.Grant{Acquired: true, Fence: e.Fence}
		return nil
	})
	return g, err
}

func (d *flockDriver) owned(tb *flockTable, name, token string) (flockEntry, error) {
	e, held := tb.Holders[name]
	switch {
	case !held:
		return e, driver.ErrExpired
	case e.Token != token:
		return e, driver.ErrTakenOver
	}
	return e, nil
}

func (d *flockDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	var opErr error
	err := d.update(ctx, func(tb *flockTable, now int64) error {
		e, err := d.owned(tb, name, token)
		if opErr = err; err == nil {
			e.Expires = now + int64(ttl)
			tb.Holders[name] = e
		}
		return nil
	})
	return errors.Join(err, opErr)
}

func (d *flockDriver) Release(ctx context.Context, name, token string) error {
	var opErr error
	err := d.update(ctx, func(tb *flockTable, now int64) error {
		if _, opErr = d.owned(tb, name, token); opErr == nil {
			delete(tb.Holders, name)
		}
		return nil
	})
	return errors.Join(err, opErr)
}

func (d *flockDriver) Close() error { return nil }

// expire deletes name's lock from outside.
func (d *flockDriver) expire(name string) {
	_ = d.update(context.Background(), func(tb *flockTable, _ int64) error {
		delete(tb.Holders, name)
		return nil
	})
}

// steal makes a foreign token hold name for an hour.
func (d *flockDriver) steal(name string) {
	_ = d.update(context.Background(), func(tb *flockTable, now int64) error {
		tb.Fences[name]++
		tb.Holders[name] = flockEntry{Token: "stolen", Owner: "thief", Fence: tb.Fences[name], Expires: now + int64(time.Hour)}
		return nil
	})
}
