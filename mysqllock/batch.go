package mysqllock

import (
	"context"
	"database/sql"
	sqldriver "database/sql/driver"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"

	"github.com/go-sql-driver/mysql"
)

// A pool whose connections accept several statements in one message
// (go-sql-driver/mysql's multiStatements, with interpolateParams: a
// statement with parameters cannot be prepared as several) sends a
// grant's statements in two round trips: START TRANSACTION with the
// locked read, then the fence draw, the row's update and COMMIT. A pool
// without them (a user's *sql.DB opened with the driver's defaults) sends
// each statement on its own. Which one a pool is, is learnt once, by a
// probe that changes nothing (batching).

// Batching states of a driver's pool.
const (
	batchUnknown int32 = iota
	batchYes
	batchNo
)

// batchProbe is two statements with a parameter each: accepted in one
// message only by a pool that batches. Elsewhere the server refuses it as
// a syntax error, running nothing.
const batchProbe = `DO ?; DO ?`

// batching reports whether conn's pool sends several statements in one
// message, probing it on the first call.
func (b *base) batching(ctx context.Context, conn *sql.Conn) (bool, error) {
	switch b.multi.Load() {
	case batchYes:
		return true, nil
	case batchNo:
		return false, nil
	}
	_, err := conn.ExecContext(ctx, batchProbe, 1, 1)
	var me *mysql.MySQLError
	switch {
	case err == nil:
		b.multi.Store(batchYes)
		return true, nil
	case errors.As(err, &me):
		b.multi.Store(batchNo)
		return false, nil
	}
	return false, err
}

// newBatchState is a driver's batching state, shared by its copies of
// base.
func newBatchState() *atomic.Int32 { return new(atomic.Int32) }

// step is one statement of a batch with its arguments.
type step struct {
	q    string
	args []any
}

// outcome is what one statement of a batch changed.
type outcome struct {
	affected, id int64
}

// execBatch runs steps on conn in one message, returning each one's
// outcome (the server stops at the first failing statement). The
// statements go through the driver connection itself: database/sql's
// Result keeps only the last statement's outcome.
func execBatch(ctx context.Context, conn *sql.Conn, steps []step) ([]outcome, error) {
	q, values := joinSteps(steps)
	args := make([]sqldriver.NamedValue, len(values))
	for i, v := range values {
		args[i] = sqldriver.NamedValue{Ordinal: i + 1, Value: v}
	}
	var res sqldriver.Result
	err := conn.Raw(func(dc any) error {
		ex, ok := dc.(sqldriver.ExecerContext)
		if !ok {
			return fmt.Errorf("mysqllock: the pool's connections (%T) cannot run statements", dc)
		}
		var err error
		res, err = ex.ExecContext(ctx, q, args)
		return err
	})
	if err != nil {
		return nil, err
	}
	mr, ok := res.(mysql.Result)
	if !ok {
		return nil, fmt.Errorf("mysqllock: the pool's driver returned a %T, not go-sql-driver/mysql's Result", res)
	}
	affected, ids := mr.AllRowsAffected(), mr.AllLastInsertIds()
	if len(affected) != len(steps) || len(ids) != len(steps) {
		return nil, fmt.Errorf("mysqllock: %d statements sent, %d outcomes returned", len(steps), len(affected))
	}
	outs := make([]outcome, len(steps))
	for i := range outs {
		outs[i] = outcome{affected: affected[i], id: ids[i]}
	}
	return outs, nil
}

// joinSteps is steps as one message: their statements joined, and their
// arguments in order.
func joinSteps(steps []step) (string, []any) {
	qs := make([]string, len(steps))
	var args []any
	for i, s := range steps {
		qs[i] = s.q
		args = append(args, s.args...)
	}
	return strings.Join(qs, "; "), args
}
