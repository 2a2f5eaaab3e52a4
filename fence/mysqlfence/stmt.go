package mysqlfence

import (
	"context"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock/fence/internal/fencesql"
)

// stmt is one fenced write in MySQL's dialect: unnumbered "?" parameters,
// no RETURNING, no conditional ON CONFLICT.
type stmt struct{ fencesql.Stmt }

// update runs the fenced UPDATE and reports whether it matched the row.
// The affected-rows count cannot say: without clientFoundRows it counts
// changed rows, and a write of the stored values under the same fence
// changes none. The fence is set through LAST_INSERT_ID(fence), evaluated
// only for a matched row, and the server reports that value back (an
// UPDATE makes no AUTO_INCREMENT value that could be confused with it;
// so any other value, 0 included, means no match).
func (s stmt) update(ctx context.Context, db DB) (bool, error) {
	assign := make([]string, 0, len(s.Cols)+1)
	for _, c := range s.Cols {
		assign = append(assign, c+" = ?")
	}
	assign = append(assign, s.Fence+" = LAST_INSERT_ID(?)")
	q := fmt.Sprintf("UPDATE %s SET %s WHERE %s = ? AND %s <= ?", s.Table, strings.Join(assign, ", "), s.Key, s.Fence)
	args := append(append([]any{}, s.Args[2:]...), s.Args[1], s.Args[0], s.Args[1])
	res, err := db.ExecContext(ctx, q, args...)
	if err != nil {
		return false, MapError(err)
	}
	id, err := res.LastInsertId()
	return err == nil && id == s.Args[1].(int64), err
}

// insert runs a plain INSERT of the key, the fence and the values.
func (s stmt) insert(ctx context.Context, db DB) error {
	cols := append([]string{s.Key, s.Fence}, s.Cols...)
	q := fmt.Sprintf("INSERT INTO %s (%s) VALUES (?%s)", s.Table, strings.Join(cols, ", "), strings.Repeat(", ?", len(cols)-1))
	_, err := db.ExecContext(ctx, q, s.Args...)
	return MapError(err)
}

// current reads the row's fence with a shared lock: a locking read sees
// the newest committed row, as the UPDATE did, even in a REPEATABLE READ
// transaction whose plain reads would see its snapshot.
func (s stmt) current(ctx context.Context, db DB) (uint64, error) {
	var cur uint64
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s = ? LOCK IN SHARE MODE", s.Fence, s.Table, s.Key)
	err := db.QueryRowContext(ctx, q, s.Args[0]).Scan(&cur)
	return cur, err
}
