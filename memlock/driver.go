package memlock

import (
	"context"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// memDriver implements driver.Driver and the optional Notifier, Lister,
// ForceReleaser and BatchRefresher on a Store.
type memDriver struct{ s *Store }

var (
	_ driver.Driver          = (*memDriver)(nil)
	_ driver.Notifier        = (*memDriver)(nil)
	_ driver.Lister          = (*memDriver)(nil)
	_ driver.ForceReleaser   = (*memDriver)(nil)
	_ driver.BatchRefresher  = (*memDriver)(nil)
	_ driver.EvictionWatcher = (*memDriver)(nil)
	_ driver.Adopter         = (*memDriver)(nil)
)

// begin locks the store for one operation, failing when ctx is done or
// the store is stopped. On success the caller must unlock s.mu.
func (d *memDriver) begin(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.s.mu.Lock()
	if d.s.stopped {
		d.s.mu.Unlock()
		return ErrStopped
	}
	return nil
}

func (d *memDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if err := d.begin(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	e, held := d.s.live(req.Name, now)
	switch {
	case held && e.token == req.Token:
		// Our own earlier attempt won, its reply "lost": a grant, same fence.
		e.expires = now.Add(req.TTL)
		return driver.Grant{Acquired: true, Fence: e.fence}, nil
	case held:
		return driver.Grant{Holder: holder(req.Name, e, now)}, nil
	}
	e = d.s.grant(req.Name, req.Token, req.Owner, req.TTL, now)
	return driver.Grant{Acquired: true, Fence: e.fence}, nil
}

func (d *memDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	if err := d.begin(ctx); err != nil {
		return err
	}
	defer d.s.mu.Unlock()
	return d.s.refresh(name, token, ttl, time.Now())
}

// refresh extends token's hold on name; s.mu must be held.
func (s *Store) refresh(name, token string, ttl time.Duration, now time.Time) error {
	e, err := s.owned(name, token, now)
	if err != nil {
		return err
	}
	e.expires = now.Add(ttl)
	return nil
}

// owned returns name's entry if token holds it, or why not.
func (s *Store) owned(name, token string, now time.Time) (*entry, error) {
	e, held := s.live(name, now)
	switch {
	case !held:
		return nil, driver.ErrExpired
	case e.token != token:
		return nil, driver.ErrTakenOver
	}
	return e, nil
}

func (d *memDriver) RefreshBatch(ctx context.Context, items []driver.RefreshItem) ([]error, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	results := make([]error, len(items))
	for i, it := range items {
		results[i] = d.s.refresh(it.Name, it.Token, it.TTL, now)
	}
	return results, nil
}

func (d *memDriver) Release(ctx context.Context, name, token string) error {
	if err := d.begin(ctx); err != nil {
		return err
	}
	defer d.s.mu.Unlock()
	if _, err := d.s.owned(name, token, time.Now()); err != nil {
		return err
	}
	delete(d.s.holders, name)
	d.s.notify(name)
	return nil
}

// Close does nothing: the Store outlives its Lockers.
func (d *memDriver) Close() error { return nil }

func holder(name string, e *entry, now time.Time) driver.Holder {
	return driver.Holder{Name: name, Owner: e.owner, Fence: e.fence, TTL: e.expires.Sub(now)}
}

// Adopt extends token's hold on req.Name, as Refresh does, and returns its
// fence.
func (d *memDriver) Adopt(ctx context.Context, req driver.Request, _ uint64) (driver.Grant, error) {
	if err := d.begin(ctx); err != nil {
		return driver.Grant{}, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	e, err := d.s.owned(req.Name, req.Token, now)
	if err != nil {
		return driver.Grant{}, err
	}
	e.expires = now.Add(req.TTL)
	return driver.Grant{Acquired: true, Fence: e.fence}, nil
}
