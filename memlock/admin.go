package memlock

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

func (d *memDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	if err := d.begin(ctx); err != nil {
		return nil, nil, err
	}
	defer d.s.mu.Unlock()
	ch := make(chan struct{}, 1)
	w := d.s.watchers[name]
	if w == nil {
		w = map[chan struct{}]struct{}{}
		d.s.watchers[name] = w
	}
	w[ch] = struct{}{}
	return ch, func() { d.s.unwatch(name, ch) }, nil
}

func (s *Store) unwatch(name string, ch chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.watchers[name], ch)
	if len(s.watchers[name]) == 0 {
		delete(s.watchers, name)
	}
}

func (d *memDriver) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	if err := d.begin(ctx); err != nil {
		return nil, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	var hs []driver.Holder
	for name := range d.s.holders {
		if e, ok := d.s.live(name, now); ok && strings.HasPrefix(name, prefix) {
			hs = append(hs, holder(name, e, now))
		}
	}
	slices.SortFunc(hs, func(a, b driver.Holder) int { return strings.Compare(a.Name, b.Name) })
	return hs, nil
}

func (d *memDriver) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	if err := d.begin(ctx); err != nil {
		return driver.Holder{}, false, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	e, ok := d.s.live(name, now)
	if !ok {
		return driver.Holder{}, false, nil
	}
	return holder(name, e, now), true, nil
}

func (d *memDriver) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	if err := d.begin(ctx); err != nil {
		return driver.Holder{}, false, 0, err
	}
	defer d.s.mu.Unlock()
	now := time.Now()
	e, ok := d.s.live(name, now)
	var evicted driver.Holder
	if ok {
		evicted = holder(name, e, now)
		delete(d.s.holders, name)
		d.s.notify(name)
		d.s.pushEviction(driver.Eviction{Name: name, Fence: e.fence})
	}
	d.s.fences[name]++
	return evicted, ok, d.s.fences[name], nil
}

// WatchEvictions implements driver.EvictionWatcher. No push is dropped:
// each subscription queues its own (evictionSub). A new subscription is
// told the evictions of the last evictionLookback first: the portable
// layer subscribes in the background once a Locker holds its first
// lease, and a force-release of that lease in between would otherwise
// reach its holder only at its next refresh, as a loss of another kind.
// An older eviction told again is harmless: it names a grant (name and
// fence) that no lease granted since has.
func (d *memDriver) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	if err := d.begin(ctx); err != nil {
		return nil, nil, err
	}
	defer d.s.mu.Unlock()
	sub := newEvictionSub()
	for _, r := range d.s.recentEvictions(time.Now()) {
		sub.push(r.e)
	}
	d.s.evictions[sub] = struct{}{}
	var once sync.Once
	return sub.out, func() {
		once.Do(func() {
			d.s.mu.Lock()
			delete(d.s.evictions, sub)
			d.s.mu.Unlock()
			sub.stop()
		})
	}, nil
}

// pushEviction tells every eviction watcher, and keeps e for the
// watchers to come. s.mu is held.
func (s *Store) pushEviction(e driver.Eviction) {
	now := time.Now()
	s.recent = append(s.recentEvictions(now), recentEviction{e: e, at: now})
	for sub := range s.evictions {
		sub.push(e)
	}
}
