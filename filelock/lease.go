package filelock

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// grantSQL takes the lock if it is free, expired, or already ours (an
// earlier attempt whose reply was lost: same fence, fresh expiry), bumping
// the fence on every new grant. It returns no row when someone else holds it.
const grantSQL = `INSERT INTO dlock_leases (name, token, owner, fence, expires_at)
VALUES (?1, ?2, ?3, ` + newFence + `, ` + nowMS + ` + ?4)
ON CONFLICT (name) DO UPDATE SET
	fence = CASE WHEN token IS excluded.token THEN fence ELSE fence + 1 END,
	token = excluded.token, owner = excluded.owner, expires_at = excluded.expires_at
WHERE token IS NULL OR token = excluded.token OR expires_at <= ` + nowMS + `
RETURNING fence`

const holderSQL = `SELECT owner, fence, expires_at - ` + nowMS + `
FROM dlock_leases WHERE name = ?1`

const refreshSQL = `UPDATE dlock_leases SET expires_at = ` + nowMS + ` + ?3
WHERE name = ?1 AND token = ?2 AND expires_at > ` + nowMS

// releaseSQL clears the holder but keeps the row (and its fence), sets
// expires_at to now (the retention counts from it), and stamps the row
// with the next release sequence number for the watchers.
const releaseSQL = `UPDATE dlock_leases SET token = NULL, owner = '', expires_at = ` + nowMS + `,
	freed = (SELECT max(freed) FROM dlock_leases) + 1
WHERE name = ?1 AND token = ?2 AND expires_at > ` + nowMS + `
RETURNING freed`

// stateSQL tells why a token-checked update matched nothing.
const stateSQL = `SELECT coalesce(token, ''), expires_at > ` + nowMS + `
FROM dlock_leases WHERE name = ?1`

// peekSQL reads the holder without taking the write lock.
const peekSQL = `SELECT coalesce(token, ''), owner, fence, expires_at - ` + nowMS + `
FROM dlock_leases WHERE name = ?1`

// TryAcquire makes one attempt (shared with a concurrent one on the same
// name in this process, see flights). A read first answers "held" when
// another token has a live lease: WAL reads take no lock, so waiters
// polling a held lock never queue for the write lock the holder needs to
// refresh and release. Otherwise one write transaction (BEGIN IMMEDIATE
// when opened by this package) grants, or reports the holder that got in
// first.
func (d *fileDriver) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	return d.flights.do(ctx, req, func() (driver.Grant, error) { return d.attempt(ctx, req) })
}

func (d *fileDriver) attempt(ctx context.Context, req driver.Request) (driver.Grant, error) {
	if h, held, err := d.peek(ctx, req); err != nil || held {
		return driver.Grant{Holder: h}, err
	}
	tx, err := d.db.BeginTx(ctx, nil)
	if err != nil {
		return driver.Grant{}, err
	}
	defer tx.Rollback() //nolint:errcheck // a no-op after Commit
	g, err := d.tryGrant(ctx, tx, req)
	if err != nil {
		return driver.Grant{}, err
	}
	return g, tx.Commit()
}

// peek reports whether a token other than req's holds a live lease.
func (d *fileDriver) peek(ctx context.Context, req driver.Request) (driver.Holder, bool, error) {
	var token string
	var fence, left int64
	h := driver.Holder{Name: req.Name}
	err := d.stmts.peek.QueryRowContext(ctx, req.Name).Scan(&token, &h.Owner, &fence, &left)
	if errors.Is(err, sql.ErrNoRows) {
		return h, false, nil
	}
	h.Fence, h.TTL = uint64(fence), msDuration(left)
	return h, err == nil && token != "" && token != req.Token && left > 0, err
}

func (d *fileDriver) tryGrant(ctx context.Context, tx *sql.Tx, req driver.Request) (driver.Grant, error) {
	var fence int64
	err := tx.StmtContext(ctx, d.stmts.grant).QueryRowContext(ctx, req.Name, req.Token, req.Owner, millis(req.TTL)).Scan(&fence)
	if err == nil {
		return driver.Grant{Acquired: true, Fence: uint64(fence)}, nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return driver.Grant{}, err
	}
	h, err := scanHolder(tx.StmtContext(ctx, d.stmts.holder).QueryRowContext(ctx, req.Name))
	h.Name = req.Name
	return driver.Grant{Holder: h}, err
}

// Refresh extends a live lease held by token; it never revives one.
func (d *fileDriver) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	res, err := d.stmts.refresh.ExecContext(ctx, name, token, millis(ttl))
	return checked(ctx, d.stmts.state, res, err, name, token)
}

// Release frees a live lease held by token, wakes this host's waiters,
// and prunes old rows when that is due.
func (d *fileDriver) Release(ctx context.Context, name, token string) error {
	var freed int64
	err := d.stmts.release.QueryRowContext(ctx, name, token).Scan(&freed)
	if err == nil {
		d.watch.released(name, freed)
		d.maybePrune(ctx)
		return nil
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	return whyNotHeld(ctx, d.stmts.state, name, token)
}

// checked reports a token-checked update that matched nothing as
// whyNotHeld says.
func checked(ctx context.Context, state *sql.Stmt, res sql.Result, err error, name, token string) error {
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 1 {
		return err
	}
	return whyNotHeld(ctx, state, name, token)
}

// whyNotHeld returns ErrTakenOver when another token holds a live lease on
// name, else ErrExpired (the row is gone, free, or its lease ran out).
func whyNotHeld(ctx context.Context, state *sql.Stmt, name, token string) error {
	var holder string
	var live bool
	err := state.QueryRowContext(ctx, name).Scan(&holder, &live)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return driver.ErrExpired
	case err != nil:
		return err
	case live && holder != token:
		return driver.ErrTakenOver
	}
	return driver.ErrExpired
}

// scanHolder reads owner, fence and milliseconds left.
func scanHolder(row *sql.Row) (driver.Holder, error) {
	var h driver.Holder
	var fence, left int64
	if err := row.Scan(&h.Owner, &fence, &left); err != nil {
		return driver.Holder{}, err
	}
	h.Fence, h.TTL = uint64(fence), msDuration(left)
	return h, nil
}

// msDuration turns milliseconds left into a TTL, never negative.
func msDuration(ms int64) time.Duration {
	return max(time.Duration(ms)*time.Millisecond, 0)
}

// millis rounds a TTL up to whole milliseconds, the table's unit.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}
