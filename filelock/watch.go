package filelock

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// How often the watcher looks for releases made by other processes while
// anyone in this process waits (SQLite cannot notify across processes; a
// release in this process is signalled at once). It polls every pollMin
// while releases keep coming, and slows down by doubling to pollMax while
// none do: on this machine merely waking every 2 ms costs about 5% of a
// core, a wait behind a long-running holder should not, and a release after
// a long quiet spell is still seen within pollMax.
const (
	pollMin = 2 * time.Millisecond
	pollMax = 32 * time.Millisecond
)

// freedSQL finds the releases since the last look, and whether each name
// is still free: one taken again already (by a faster process) wakes
// nobody here, since its next release will be seen in turn.
const freedSQL = `SELECT name, freed, token IS NULL OR expires_at <= ` + nowMS + `
FROM dlock_leases WHERE freed > ?1 ORDER BY freed`

const lastFreedSQL = `SELECT coalesce(max(freed), 0) FROM dlock_leases`

// watcher implements driver.Notifier, and driver.EvictionWatcher (see
// evictions.go), for one store. Each release wakes
// the longest-waiting watcher of its name in this process, not all of them:
// the others would only lose the race (they keep their backoff, so a
// wake-up lost to a canceled waiter only delays them). Releases through
// this store are signalled directly; releases by other processes are found
// by a single goroutine that, only while someone watches, polls for names
// whose freed sequence number (stamped by every release) is above the
// largest it has seen. The same goroutine polls for force-releases while
// an eviction watcher is subscribed.
type watcher struct {
	db       *sql.DB // polled when openPoll is nil
	openPoll func() (*sql.DB, error)

	mu    sync.Mutex
	poll  *sql.DB   // the connection polled; opened on first use
	since *sql.Stmt // freedSQL prepared on poll
	subs  map[string][]chan struct{}
	last  int64 // the largest freed value seen
	// evictions is evictionsSQL prepared on poll; evicts are the eviction
	// watchers, and evLast the largest eviction record seen.
	evictions *sql.Stmt
	evicts    map[chan driver.Eviction]struct{}
	evLast    int64
	local     map[int64]struct{} // freed values already signalled directly
	running   bool
	closed    bool
	stop      context.CancelFunc // ends the poller's context
	// loops counts the pollers still running: the current one, and any
	// stopped when the last subscriber left but not yet returned from a
	// poll (a new subscriber starts a new poller without waiting for
	// them). close waits for all, so that none uses the poll connection
	// after it is closed.
	loops sync.WaitGroup
	kick  chan struct{} // a new watcher: poll fast again
}

var errClosed = errors.New("filelock: driver closed")

func newWatcher(db *sql.DB, openPoll func() (*sql.DB, error)) *watcher {
	return &watcher{
		db: db, openPoll: openPoll, kick: make(chan struct{}, 1),
		subs: map[string][]chan struct{}{}, local: map[int64]struct{}{},
		evicts: map[chan driver.Eviction]struct{}{},
	}
}

// Watch subscribes to releases of name. A release committed after Watch
// returns has a larger freed value than any the watcher has seen, so the
// next poll finds it.
func (d *fileDriver) Watch(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	return d.watch.add(ctx, name)
}

func (w *watcher) add(ctx context.Context, name string) (<-chan struct{}, func(), error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.ensure(ctx); err != nil {
		return nil, nil, err
	}
	ch := make(chan struct{}, 1)
	w.subs[name] = append(w.subs[name], ch)
	select {
	case w.kick <- struct{}{}:
	default:
	}
	var once sync.Once
	return ch, func() { once.Do(func() { w.remove(name, ch) }) }, nil
}

// ensure starts the poller unless it runs; w.mu is held.
func (w *watcher) ensure(ctx context.Context) error {
	switch {
	case w.closed:
		return errClosed
	case !w.running:
		return w.start(ctx)
	}
	return nil
}

// start reads the current release sequence and starts the poller; w.mu
// is held.
func (w *watcher) start(ctx context.Context) error {
	if w.poll == nil {
		if err := w.openPollDB(ctx); err != nil {
			return err
		}
	}
	if err := w.poll.QueryRowContext(ctx, lastFreedSQL).Scan(&w.last); err != nil {
		return err
	}
	if err := w.poll.QueryRowContext(ctx, lastEvictionSQL, evictionLookback.Milliseconds()).Scan(&w.evLast); err != nil {
		return err
	}
	clear(w.local)
	w.running = true
	ctx, stop := context.WithCancel(context.Background())
	w.stop = stop
	w.loops.Go(func() { w.loop(ctx) })
	return nil
}

// openPollDB opens the connection to poll and prepares the queries (which
// cost ten times more to parse than to run); w.mu is held.
func (w *watcher) openPollDB(ctx context.Context) error {
	db := w.db
	if w.openPoll != nil {
		var err error
		if db, err = w.openPoll(); err != nil {
			return err
		}
	}
	since, err := db.PrepareContext(ctx, freedSQL)
	if err != nil {
		return errors.Join(err, w.closePollDB(db))
	}
	evictions, err := db.PrepareContext(ctx, evictionsSQL)
	if err != nil {
		return errors.Join(err, since.Close(), w.closePollDB(db))
	}
	w.poll, w.since, w.evictions = db, since, evictions
	return nil
}

func (w *watcher) closePollDB(db *sql.DB) error {
	if w.openPoll == nil {
		return nil
	}
	return db.Close()
}

func (w *watcher) remove(name string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs[name] = slices.DeleteFunc(w.subs[name], func(c chan struct{}) bool { return c == ch })
	if len(w.subs[name]) == 0 {
		delete(w.subs, name)
	}
	w.stopIfIdle()
}

// stopIfIdle stops the poller when nobody watches anything; w.mu is held.
func (w *watcher) stopIfIdle() {
	if len(w.subs) == 0 && len(w.evicts) == 0 && w.running {
		w.running = false
		w.stop()
	}
}

// wants reports what the poller polls for: releases (someone waits) and
// force-releases (an eviction watcher is subscribed).
func (w *watcher) wants() (releases, evictions bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.subs) > 0, len(w.evicts) > 0
}

// released signals a release made through this driver, without waiting
// for the next poll, and remembers it so that the poll does not signal it
// again.
func (w *watcher) released(name string, freed int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.running && freed > w.last {
		w.local[freed] = struct{}{}
		w.wake(name)
	}
}

// wake signals the longest-waiting watcher of name; w.mu is held.
func (w *watcher) wake(name string) {
	if subs := w.subs[name]; len(subs) > 0 {
		select {
		case subs[0] <- struct{}{}:
		default: // already signalled: it is about to try anyway
		}
	}
}

func (w *watcher) loop(ctx context.Context) {
	every := pollMin
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.kick:
			every = pollMin
			t.Reset(every)
			continue
		case <-t.C:
		}
		releases, evictions := w.wants()
		if evictions {
			w.checkEvictions(ctx)
		}
		if !releases { // evictions alone: no need to hurry
			every = pollMin
			t.Reset(evictPoll)
			continue
		}
		if w.check(ctx) {
			every = pollMin
		} else {
			every = min(2*every, pollMax)
		}
		t.Reset(every)
	}
}

// check signals the names freed since the last look and reports whether
// there were any. A failed poll is simply tried again at the next tick;
// waiters still have their backoff.
func (w *watcher) check(ctx context.Context) bool {
	w.mu.Lock()
	last, since := w.last, w.since
	w.mu.Unlock()
	freed, err := releasedSince(ctx, since, last)
	if err != nil || len(freed) == 0 {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, f := range freed {
		if _, done := w.local[f.seq]; !done && f.seq > w.last && f.free {
			w.wake(f.name)
		}
		delete(w.local, f.seq)
	}
	w.last = max(w.last, freed[len(freed)-1].seq)
	return true
}

type release struct {
	name string
	seq  int64
	free bool
}

func releasedSince(ctx context.Context, since *sql.Stmt, last int64) ([]release, error) {
	rows, err := since.QueryContext(ctx, last)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var rs []release
	for rows.Next() {
		var r release
		if err := rows.Scan(&r.name, &r.seq, &r.free); err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, rows.Err()
}

// close stops the poller, waits for every poller still running (loops),
// and closes its own connection.
func (w *watcher) close() error {
	w.mu.Lock()
	w.closed = true
	if w.running {
		w.running = false
		w.stop()
	}
	poll, since, evictions := w.poll, w.since, w.evictions
	w.mu.Unlock()
	w.loops.Wait()
	if poll == nil {
		return nil
	}
	return errors.Join(since.Close(), evictions.Close(), w.closePollDB(poll))
}
