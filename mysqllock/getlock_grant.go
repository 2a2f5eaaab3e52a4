package mysqllock

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// A get_lock-mode grant on MariaDB is one message. A no-wait grant
// (TryAcquire) is one statement: the holder row written with the fence
// from the sequence, only when GET_LOCK in its WHERE took the key
// (glTryOne). A grant that waits in the server is GET_LOCK with the
// fence drawn from the sequence in the same statement, and the holder
// row written after it (glTrySeq, glPublishSeq). Its release is
// RELEASE_LOCK alone: the row stays until the connection's next grant
// replaces it or the monitor's sweep deletes it, and counts only while
// its connection holds the key. A cycle is then the two statements a
// hand-written GET_LOCK/RELEASE_LOCK pair sends, with one row written;
// drawing from the counter row and deleting the row at release, it was
// five statements and three rows written. On MySQL 8, which has no
// sequences, a grant is GET_LOCK, the counter's UPDATE and the row, one
// statement each.

// grant takes key on conn, waiting up to wait seconds, draws its fence
// and writes the holder row; fence is 0 when the key was not taken.
func (d *getLocks) grant(ctx context.Context, conn *sql.Conn, req driver.Request, key string, wait float64, maria bool) (fence, connID uint64, err error) {
	if !maria {
		var got sql.NullInt64
		if err := conn.QueryRowContext(ctx, glTry, key, wait).Scan(&got, &connID); err != nil || got.Int64 != 1 {
			return 0, connID, err
		}
		if fence, err = d.drawFence(ctx, conn); err != nil {
			return 0, connID, err
		}
		_, err = conn.ExecContext(ctx, d.publish, connID, req.Name, req.Token, req.Owner, fence)
		return fence, connID, err
	}
	if wait == 0 {
		return d.grantNow(ctx, conn, req, key)
	}
	batch, err := d.batching(ctx, conn)
	if err != nil {
		return 0, 0, err
	}
	if !batch {
		if err := conn.QueryRowContext(ctx, d.trySeq, key, wait).Scan(&fence, &connID); err != nil || fence == 0 {
			return 0, connID, err
		}
		_, err = conn.ExecContext(ctx, d.publishSeq, req.Name, req.Token, req.Owner, key)
		return fence, connID, err
	}
	rows, err := conn.QueryContext(ctx, d.trySeqBatch, key, wait, req.Name, req.Token, req.Owner, key)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	if !rows.Next() {
		return 0, 0, errOr(rows.Err(), "the grant returned no row")
	}
	if err := rows.Scan(&fence, &connID); err != nil {
		return 0, connID, err
	}
	rows.NextResultSet() // the row's REPLACE: no result set, an error if it failed
	if err := rows.Err(); err != nil {
		return 0, connID, err
	}
	return fence, connID, rows.Close()
}

// grantNow is a no-wait grant on MariaDB, in one statement (glTryOne);
// connID is left 0, for the monitor to learn.
func (d *getLocks) grantNow(ctx context.Context, conn *sql.Conn, req driver.Request, key string) (fence, connID uint64, err error) {
	res, err := conn.ExecContext(ctx, d.tryOne, req.Name, req.Token, req.Owner, key)
	if err != nil {
		return 0, 0, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return 0, 0, err
	}
	f, err := res.LastInsertId()
	if err == nil && f <= 0 {
		err = fmt.Errorf("mysqllock: a grant wrote its row with fence %d", f)
	}
	return uint64(f), 0, err
}

// errOr is err, or an error saying what when err is nil.
func errOr(err error, what string) error {
	if err != nil {
		return err
	}
	return errors.New("mysqllock: " + what)
}

// unlock releases s's key on its connection; released is RELEASE_LOCK's
// answer (1 when the connection held the key). s.mu is held.
func (d *getLocks) unlock(ctx context.Context, s *glSession) (sql.NullInt64, error) {
	var released sql.NullInt64
	err := s.conn.QueryRowContext(ctx, glRelease, s.key).Scan(&released)
	return released, err
}

// drawNext draws a fence above every fence drawn so far: from the
// sequence on MariaDB, from the counter on MySQL.
func (d *getLocks) drawNext(ctx context.Context) (uint64, error) {
	maria, err := isMariaDB(ctx, d.db, &d.flavor)
	if err != nil {
		return 0, err
	}
	if !maria {
		return d.drawFence(ctx, d.db)
	}
	var v uint64
	err = d.db.QueryRowContext(ctx, d.nextFence).Scan(&v)
	return v, err
}

// holderSweepEvery is how often the monitor deletes the holder rows that no
// longer count.
const holderSweepEvery = time.Minute

// sweepRows deletes the holder rows whose connection no longer holds
// their key, at most once every holderSweepEvery; a failure waits for the next.
func (d *getLocks) sweepRows(ctx context.Context) {
	last, now := d.lastSweep.Load(), time.Now().UnixNano()
	if now-last < int64(holderSweepEvery) || !d.lastSweep.CompareAndSwap(last, now) {
		return // swept lately, or by another monitor (one stopping while the next starts)
	}
	sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, _ = d.db.ExecContext(sctx, d.sweep)
}
