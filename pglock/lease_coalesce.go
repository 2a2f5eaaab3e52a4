package pglock

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/coalesce"
	"github.com/jackc/pgx/v5"
)

// coalesceSends is how many statements of coalesced tries, and as many of
// coalesced waiters' attempts and of releases, a lease-mode driver keeps
// in flight: a call that finds one free is sent alone at once, and the
// calls made while all are busy go in the next, together
// (internal/coalesce). With two, four goroutines trying at once lost to
// one statement a call (two pairs instead of four statements in
// parallel: 0.56–0.64× the hand-written lease against 0.70–0.73× before
// coalescing); with three, none of 2, 4, 16 and 64 goroutines is slower
// than before, and 16 and 64 are faster (0.81–0.82× and 1.56–1.60×
// against 0.67–0.70× and 0.72×). One, or two, would do better at 16
// goroutines, at the cost of the few.
const coalesceSends = 3

// A try (TryAcquire's grant statement), a waiter's attempt (AcquireWait's
// grant-or-queue statement) or a release of a name nobody contended
// lately, made by several goroutines of one driver at the same moment, is
// one statement for them all (leaseAcquireMany, leaseAcquireInTurnMany,
// leaseReleaseMany): Postgres runs one statement of eight items in a
// fraction of the time of eight statements. Each item is decided as its
// own statement would decide it, and what only some items need (the
// holder's look-up after a refused try or an attempt that neither won nor
// queued, the tombstone of a release whose token did not hold the row) is
// the same statement as for a call alone. A statement that fails (a
// deadlock between two of them, a lost connection) fails none of its
// calls: each is then sent alone. A name twice in one batch is sent alone
// after it, as a statement may change a row once only. The release of a
// name seen contended, which hands the lock over, is one statement a
// call.

// tryCall is one TryAcquire's grant statement.
type tryCall struct {
	ctx context.Context
	req driver.Request
	g   driver.Grant
	won bool
	err error
}

// turnCall is one waiter's attempt (leaseAcquireInTurn) and its answer.
type turnCall struct {
	ctx  context.Context
	req  driver.Request
	elem string
	sent time.Time // when its statement was sent

	answered bool // the statement returned a row for it
	won      bool
	owner    string
	fence    int64
	micros   int64 // the holder's time left, -1 when free
	reserved int64 // the reservation's time left, -1 when none
	ran      int64 // the database clock, µs
	err      error
}

// releaseCall is one Release by the plain statement (leaseRelease).
type releaseCall struct {
	ctx         context.Context
	name, token string
	err         error
}

// newBatchers sets up the coalescing of d's tries, waiters' attempts and
// releases.
func (d *leases) newBatchers() {
	d.tries = coalesce.New(coalesceSends, d.tryOne, d.tryMany)
	d.turns = coalesce.New(coalesceSends, d.turnOne, d.turnMany)
	d.releases = coalesce.New(coalesceSends, d.releaseOne, d.releaseMany)
}

// try runs TryAcquire's grant statement for req, alone or with the tries
// of other goroutines (tryMany).
func (d *leases) try(ctx context.Context, req driver.Request) (driver.Grant, bool, error) {
	c := &tryCall{ctx: ctx, req: req}
	if !d.tries.Do(ctx, c) {
		return driver.Grant{}, false, d.classify(ctx.Err())
	}
	return c.g, c.won, c.err
}

func (d *leases) tryOne(ctx context.Context, c *tryCall) {
	c.g, c.won, c.err = d.grant(ctx, c.req, d.acquire)
}

// tryMany decides calls in one statement (leaseAcquireMany).
func (d *leases) tryMany(ctx context.Context, calls []*tryCall) {
	batch, again := distinct(calls, func(c *tryCall) string { return c.req.Name })
	if len(batch) > 1 {
		names, tokens, owners, micros := requests(batch, func(c *tryCall) driver.Request { return c.req })
		granted := map[string]int64{}
		var (
			name  string
			fence int64
		)
		rows, err := d.pool.Query(ctx, d.acquireManySQL, names, tokens, owners, micros)
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&name, &fence}, func() error {
				granted[name] = fence
				return nil
			})
		}
		if err == nil {
			for _, c := range batch {
				if f, ok := granted[c.req.Name]; ok {
					c.g, c.won = driver.Grant{Acquired: true, Fence: uint64(f)}, true
				}
			}
			batch = nil
		}
	}
	for _, c := range append(batch, again...) {
		d.tryOne(c.ctx, c)
	}
}

// turnOne runs a waiter's attempt alone (leaseAcquireInTurn).
func (d *leases) turnOne(ctx context.Context, c *turnCall) {
	c.sent = time.Now()
	err := d.pool.QueryRow(ctx, d.acquireInTurn, c.req.Name, c.req.Token, c.req.Owner, c.req.TTL.Microseconds(), c.elem).
		Scan(&c.won, &c.fence, &c.owner, &c.micros, &c.reserved, &c.ran)
	c.answered = err == nil
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		c.err = err
	}
}

// turnMany decides waiters' attempts in one statement
// (leaseAcquireInTurnMany).
func (d *leases) turnMany(ctx context.Context, calls []*turnCall) {
	batch, again := distinct(calls, func(c *turnCall) string { return c.req.Name })
	if len(batch) > 1 {
		names, tokens, owners, micros := requests(batch, func(c *turnCall) driver.Request { return c.req })
		elems := make([]string, len(batch))
		for i, c := range batch {
			elems[i] = c.elem
		}
		answers := make(map[string]turnCall, len(batch))
		var (
			name string
			a    turnCall
		)
		sent := time.Now()
		rows, err := d.pool.Query(ctx, d.acquireInTurnManySQL, names, tokens, owners, micros, elems)
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&name, &a.won, &a.fence, &a.owner, &a.micros, &a.reserved, &a.ran}, func() error {
				answers[name] = a
				return nil
			})
		}
		if err == nil {
			for _, c := range batch {
				c.sent = sent
				if a, ok := answers[c.req.Name]; ok {
					c.answered, c.won, c.fence, c.owner, c.micros, c.reserved, c.ran = true, a.won, a.fence, a.owner, a.micros, a.reserved, a.ran
				}
			}
			batch = nil
		}
	}
	for _, c := range append(batch, again...) {
		d.turnOne(c.ctx, c)
	}
}

// releaseOne is Release by the plain statement, alone.
func (d *leases) releaseOne(ctx context.Context, c *releaseCall) {
	c.err = d.releaseBy(ctx, d.release, c.name, c.token)
}

// releaseMany frees calls' leases in one statement (leaseReleaseMany).
func (d *leases) releaseMany(ctx context.Context, calls []*releaseCall) {
	batch, again := distinct(calls, func(c *releaseCall) string { return c.name })
	if len(batch) > 1 {
		names := make([]string, len(batch))
		tokens := make([]string, len(batch))
		for i, c := range batch {
			names[i], tokens[i] = c.name, c.token
		}
		freed := map[string]bool{}
		var (
			name     string
			notified *string
		)
		rows, err := d.pool.Query(ctx, d.releaseManySQL, names, tokens, d.channel)
		if err == nil {
			_, err = pgx.ForEachRow(rows, []any{&name, &notified}, func() error {
				freed[name] = true
				if notified != nil {
					d.recent.Saw(name) // someone waits: hand over next time
				}
				return nil
			})
		}
		if err == nil {
			for _, c := range batch {
				if !freed[c.name] {
					c.err = d.notReleased(c.ctx, c.name, c.token)
				}
			}
			d.maybeSweep(ctx)
			batch = nil
		}
	}
	for _, c := range append(batch, again...) {
		d.releaseOne(c.ctx, c)
	}
}

// requests are the names, tokens, owners and TTLs (µs) of the calls'
// requests, as the coalesced statements take them.
func requests[C any](calls []C, req func(C) driver.Request) (names, tokens, owners []string, micros []int64) {
	names, tokens, owners, micros = make([]string, len(calls)), make([]string, len(calls)), make([]string, len(calls)), make([]int64, len(calls))
	for i, c := range calls {
		r := req(c)
		names[i], tokens[i], owners[i], micros[i] = r.Name, r.Token, r.Owner, r.TTL.Microseconds()
	}
	return names, tokens, owners, micros
}

// distinct splits calls into a batch with each name once, sorted by name
// (the order the statements lock rows in), and the calls on a name
// already in it, to be sent after it, alone.
func distinct[C any](calls []C, name func(C) string) (batch, again []C) {
	seen := make(map[string]bool, len(calls))
	for _, c := range calls {
		if n := name(c); seen[n] {
			again = append(again, c)
		} else {
			seen[n] = true
			batch = append(batch, c)
		}
	}
	slices.SortFunc(batch, func(a, b C) int { return cmp.Compare(name(a), name(b)) })
	return batch, again
}
