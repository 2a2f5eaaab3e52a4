package dlock

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
)

// Inspect returns the current holder of name; ok is false when it is free.
func (l *Locker) Inspect(ctx context.Context, name string) (h Holder, ok bool, err error) {
	lister, err := l.lister()
	if err != nil {
		return Holder{}, false, err
	}
	if err := validName(name); err != nil {
		return Holder{}, false, err
	}
	dh, ok, err := lister.Inspect(ctx, name)
	if err != nil {
		return Holder{}, false, backend("inspect", name, err)
	}
	h = holderFrom(dh)
	h.Name, h.Kind, h.Slot = name, KindMutex, -1
	return h, ok, nil
}

// List returns the held locks whose names start with prefix ("" for all).
func (l *Locker) List(ctx context.Context, prefix string) ([]Holder, error) {
	lister, err := l.lister()
	if err != nil {
		return nil, err
	}
	dhs, err := lister.List(ctx, prefix)
	if err != nil {
		return nil, backend("list", prefix, err)
	}
	hs := make([]Holder, len(dhs))
	for i, dh := range dhs {
		hs[i] = holderFrom(dh)
	}
	return hs, nil
}

func (l *Locker) lister() (driver.Lister, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	lister, ok := l.drv.(driver.Lister)
	if !ok {
		return nil, fmt.Errorf("dlock: this backend cannot list holders: %w", ErrUnsupported)
	}
	return lister, nil
}

// ForceRelease frees name whoever holds it: the administrator's way out of
// a wedged lock. It also raises the name's fence, so that the next holder's
// fence is above every earlier one: a fence-checking resource rejects the
// evicted holder's writes once a write with a newer fence has reached it
// (until then only the holder's loss stops it). It returns the evicted holder
// (ok false when the lock was free) and the new fence. When the evicted
// holder is a lease of this Locker, that lease has ended
// (LostForceReleased) by the time ForceRelease returns, whatever the
// backend pushes; holders elsewhere learn of it by the backend's push
// (driver.EvictionWatcher) or at their next refresh.
func (l *Locker) ForceRelease(ctx context.Context, name string) (evicted Holder, ok bool, newFence uint64, err error) {
	if err := l.usable(); err != nil {
		return Holder{}, false, 0, err
	}
	if err := validName(name); err != nil {
		return Holder{}, false, 0, err
	}
	return l.forceRelease(ctx, name)
}

// forceRelease frees a backend key (a plain lock's name, or a primitive's
// grant) and reports the evicted holder under its user-facing name.
func (l *Locker) forceRelease(ctx context.Context, key string) (evicted Holder, ok bool, newFence uint64, err error) {
	if err := l.usable(); err != nil {
		return Holder{}, false, 0, err
	}
	ki := parseKey(key)
	fr, isFR := l.drv.(driver.ForceReleaser)
	if !isFR {
		return Holder{}, false, 0, fmt.Errorf("dlock: this backend cannot force-release: %w", ErrUnsupported)
	}
	dh, ok, fence, err := fr.ForceRelease(ctx, key)
	if err != nil {
		return Holder{}, false, 0, backend("force-release", ki.name, err)
	}
	if ok {
		// A lease of this Locker needs no push: a push may not come (the
		// file backend has none) or come late (a subscription still
		// starting right after the first grant).
		l.watchdog.evict(driver.Eviction{Name: key, Fence: dh.Fence})
	}
	evicted = holderFrom(dh)
	evicted.Name, evicted.Kind, evicted.Permits, evicted.Slot = ki.name, ki.kind, ki.permits, ki.slot
	return evicted, ok, fence, nil
}

// Migrate creates the backend's schema if it has one (Postgres lease
// table); it is idempotent and a no-op for backends without a schema.
func (l *Locker) Migrate(ctx context.Context) error {
	if err := l.usable(); err != nil {
		return err
	}
	m, ok := l.drv.(driver.Migrator)
	if !ok {
		return nil
	}
	if err := m.Migrate(ctx); err != nil {
		return backend("migrate", "schema", err)
	}
	return nil
}

// MigrateReport creates what the backend's schema lacks, as Migrate does,
// and names each object it created (none when the schema was in place:
// dlock migrate prints them). A backend without a schema returns an error
// matching ErrUnsupported, so that "nothing to migrate" is told apart from
// "up to date". A driver that migrates without saying what it created
// reports none.
func (l *Locker) MigrateReport(ctx context.Context) ([]string, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	switch m := l.drv.(type) {
	case driver.MigrationReporter:
		created, err := m.MigrateReport(ctx)
		if err != nil {
			return nil, backend("migrate", "schema", err)
		}
		return created, nil
	case driver.Migrator:
		return nil, l.Migrate(ctx)
	}
	return nil, fmt.Errorf("dlock: this backend has no schema to migrate: %w", ErrUnsupported)
}

// Diagnose runs the backend's checks of its deployment against the
// settings that break a guarantee (what dlock doctor prints): each Finding
// names a setting, its value and the fix. A backend that offers no checks
// returns an error matching ErrUnsupported; a check that cannot run
// returns the backend's error.
func (l *Locker) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	if err := l.usable(); err != nil {
		return nil, err
	}
	d, ok := l.drv.(driver.Diagnoser)
	if !ok {
		return nil, fmt.Errorf("dlock: this backend offers no deployment checks: %w", ErrUnsupported)
	}
	return d.Diagnose(ctx)
}
