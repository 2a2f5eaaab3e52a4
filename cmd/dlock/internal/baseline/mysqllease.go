package baseline

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Statements of the hand-written MySQL lease: a table, a sequence for the
// fences (MariaDB 10.3 and later), one upsert that takes a free or
// expired name and a token-checked DELETE.
//
// The upsert's assignments run left to right, each seeing the earlier
// ones' new values: expires_at, which every condition reads, is assigned
// last. LAST_INSERT_ID(fence) puts the fence drawn in the server's reply;
// the rows the statement changed (1 inserted, 2 taken over, 0 held) say
// whether it took the lock.
const (
	myLeaseTable = `CREATE TABLE IF NOT EXISTS dlock_bench_lease (
	name VARBINARY(512) PRIMARY KEY, token CHAR(32) NOT NULL, fence BIGINT UNSIGNED NOT NULL, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB`
	myLeaseSequence = `CREATE SEQUENCE IF NOT EXISTS dlock_bench_fence`
	myLeaseTake     = `INSERT INTO dlock_bench_lease (name, token, fence, expires_at)
VALUES (?, ?, LAST_INSERT_ID(NEXTVAL(dlock_bench_fence)), UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND)
ON DUPLICATE KEY UPDATE
	token = IF(expires_at < UTC_TIMESTAMP(6), VALUES(token), token),
	fence = IF(expires_at < UTC_TIMESTAMP(6), VALUES(fence), fence),
	expires_at = IF(expires_at < UTC_TIMESTAMP(6), VALUES(expires_at), expires_at)`
	myLeaseDrop = `DELETE FROM dlock_bench_lease WHERE name = ? AND token = ?`
)

// mysqlLease is the hand-written upsert lease.
type mysqlLease struct {
	db        *sql.DB
	ttlMicros int64
}

// newMySQLLease creates the baseline's table and sequence.
func newMySQLLease(ctx context.Context, db *sql.DB, ttl time.Duration) (*mysqlLease, error) {
	if _, err := db.ExecContext(ctx, myLeaseTable); err != nil {
		return nil, fmt.Errorf("create the baseline's lease table: %w", err)
	}
	if _, err := db.ExecContext(ctx, myLeaseSequence); err != nil {
		return nil, fmt.Errorf("create the baseline's fence sequence (MariaDB 10.3 or later; MySQL has no SEQUENCE): %w", err)
	}
	return &mysqlLease{db: db, ttlMicros: ttl.Microseconds()}, nil
}

// try runs the upsert: whether it took name, and the fence it drew.
func (l *mysqlLease) try(ctx context.Context, name, tok string) (bool, error) {
	res, err := l.db.ExecContext(ctx, myLeaseTake, name, tok, l.ttlMicros)
	if isLockConflict(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	if fence, err := res.LastInsertId(); err != nil || fence <= 0 {
		return false, fmt.Errorf("baseline: the upsert took %q without a fence (%d): %v", name, fence, err)
	}
	return true, nil
}

// isLockConflict reports InnoDB's deadlock and lock wait timeout errors,
// which concurrent upserts of one name can meet: the attempt failed, as a
// held name does, and the poll tries again.
func isLockConflict(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

func (l *mysqlLease) drop(ctx context.Context, name, tok string) error {
	_, err := l.db.ExecContext(ctx, myLeaseDrop, name, tok)
	return err
}
