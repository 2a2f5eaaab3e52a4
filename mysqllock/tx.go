package mysqllock

import (
	"context"
	"database/sql"
)

// tx is a transaction on a connection pinned from the pool, begun and
// ended by statements sent under the caller's context. database/sql's
// Tx.Commit and Tx.Rollback take no context, and the driver reads their
// reply without a deadline: on a stopped server they would wait past the
// caller's deadline. Here the driver's context watcher closes the
// connection when the context ends, and a transaction that did not end
// cleanly is never lent again: its connection is closed, and the server
// rolls the transaction back.
type tx struct {
	conn  *sql.Conn
	ended bool
}

// begin pins a connection and starts a transaction on it; pre are
// statements sent before START TRANSACTION (an isolation level).
func (b *base) begin(ctx context.Context, pre ...string) (*tx, error) {
	conn, err := b.db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	t := &tx{conn: conn}
	for _, q := range append(pre, "START TRANSACTION") {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.discard()
			return nil, err
		}
	}
	return t, nil
}

// ExecContext runs a statement in the transaction.
func (t *tx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, q, args...)
}

// QueryContext runs a query in the transaction.
func (t *tx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, q, args...)
}

// QueryRowContext runs a one-row query in the transaction.
func (t *tx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(ctx, q, args...)
}

// commit commits the transaction and gives the connection back; on any
// failure the connection is closed, and the outcome of a COMMIT whose
// reply was lost is unknown to the caller.
func (t *tx) commit(ctx context.Context) error {
	return t.end(ctx, "COMMIT")
}

// rollback ends the transaction unless commit did: by ROLLBACK, or by
// closing the connection when that fails or ctx ends first.
func (t *tx) rollback(ctx context.Context) {
	if !t.ended {
		_ = t.end(ctx, "ROLLBACK")
	}
}

func (t *tx) end(ctx context.Context, stmt string) error {
	t.ended = true
	if _, err := t.conn.ExecContext(ctx, stmt); err != nil {
		t.discard()
		return err
	}
	return t.conn.Close()
}

// discard closes the connection for good, ending its transaction.
func (t *tx) discard() {
	t.ended = true
	discard(t.conn)
}
