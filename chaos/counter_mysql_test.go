package chaos

import (
	"context"
	"database/sql"

	"github.com/dlockdev/dlock/fence/mysqlfence"
)

// mysqlCounters is the counter table in MySQL or MariaDB (InnoDB).
type mysqlCounters struct{ db *sql.DB }

// mysqlCounterTable is the fenced counter table for mysqlfence.
var mysqlCounterTable = mysqlfence.Table{Name: "chaos_counter", Key: "id"}

func openMySQLCounters(dsn string) (counterStore, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, err
	}
	return mysqlCounters{db}, nil
}

func (c mysqlCounters) create(ctx context.Context, key string) error {
	_, err := c.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS chaos_counter (id VARCHAR(191) PRIMARY KEY,
		fence BIGINT NOT NULL DEFAULT 0, n BIGINT NOT NULL DEFAULT 0) ENGINE=InnoDB`)
	if err == nil {
		_, err = c.db.ExecContext(ctx, `INSERT INTO chaos_counter (id) VALUES (?)`, key)
	}
	return err
}

func (c mysqlCounters) read(ctx context.Context, key string) (n int64, err error) {
	err = c.db.QueryRowContext(ctx, `SELECT n FROM chaos_counter WHERE id = ?`, key).Scan(&n)
	return n, err
}

func (c mysqlCounters) write(ctx context.Context, key string, f uint64, n int64, fenced bool) (bool, error) {
	if !fenced {
		_, err := c.db.ExecContext(ctx, `UPDATE chaos_counter SET n = ? WHERE id = ?`, n, key)
		return err == nil, err
	}
	return staleIsFalse(mysqlCounterTable.Update(ctx, c.db, key, f, mysqlfence.Values{"n": n}))
}

func (c mysqlCounters) Close() { _ = c.db.Close() }
