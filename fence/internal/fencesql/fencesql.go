// Package fencesql builds what pgfence and sqlitefence share of a fenced
// SQL statement: validated, quoted names and the ordered arguments. Each
// package keeps its own SQL dialect and identifier quoting.
package fencesql

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
)

// Stmt holds a fenced statement's quoted names and its arguments.
type Stmt struct {
	Table, Key, Fence string
	// Cols are the quoted columns to set, sorted by name.
	Cols []string
	// Args are the key, the fence, then the values of Cols in order.
	Args []any
}

// Prepare checks that f fits a SQL BIGINT, quotes the table, key and fence
// column names with quote, and orders the columns of set. A column of set
// that is the key or the fence column is an invalid argument.
func Prepare(quote func(string) (string, error), table, key, fenceCol string, k any, f uint64, set map[string]any) (Stmt, error) {
	if err := fence.Valid(f, fence.MaxSQL); err != nil {
		return Stmt{}, err
	}
	var s Stmt
	var err error
	if s.Table, err = quote(table); err != nil {
		return Stmt{}, err
	}
	if s.Key, err = quote(key); err != nil {
		return Stmt{}, err
	}
	if s.Fence, err = quote(fenceCol); err != nil {
		return Stmt{}, err
	}
	s.Args = []any{k, int64(f)}
	for _, name := range slices.Sorted(maps.Keys(set)) {
		q, err := quote(name)
		if err != nil {
			return Stmt{}, err
		}
		if q == s.Key || q == s.Fence {
			return Stmt{}, fmt.Errorf("%w: column %q is the key or fence column; it cannot be set", dlock.ErrInvalidArgument, name)
		}
		s.Cols = append(s.Cols, q)
		s.Args = append(s.Args, set[name])
	}
	return s, nil
}

// UpdateSQL is the fenced UPDATE: it sets the fence and Cols on the key's
// row only where the stored fence is not higher. ph is the dialect's
// placeholder prefix ("$" for Postgres, "?" for SQLite, both numbered).
func (s Stmt) UpdateSQL(ph string) string {
	assign := []string{fmt.Sprintf("%s = %s2", s.Fence, ph)}
	for i, c := range s.Cols {
		assign = append(assign, fmt.Sprintf("%s = %s%d", c, ph, i+3))
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s = %s1 AND %s <= %s2",
		s.Table, strings.Join(assign, ", "), s.Key, ph, s.Fence, ph)
}

// UpsertSQL is the fenced INSERT ... ON CONFLICT DO UPDATE: an existing
// row is overwritten only where its fence is not higher.
func (s Stmt) UpsertSQL(ph string) string {
	cols := append([]string{s.Key, s.Fence}, s.Cols...)
	params := make([]string, len(cols))
	assign := make([]string, 0, len(cols)-1)
	for i, c := range cols {
		params[i] = fmt.Sprintf("%s%d", ph, i+1)
		if i > 0 {
			assign = append(assign, fmt.Sprintf("%s = EXCLUDED.%s", c, c))
		}
	}
	return fmt.Sprintf("INSERT INTO %s AS t (%s) VALUES (%s) ON CONFLICT (%s) DO UPDATE SET %s WHERE t.%s <= EXCLUDED.%s",
		s.Table, strings.Join(cols, ", "), strings.Join(params, ", "), s.Key,
		strings.Join(assign, ", "), s.Fence, s.Fence)
}

// ParseDetail reads the "offered=N current=M table=T" fields that both
// packages' triggers put in their error into a *fence.StaleError.
func ParseDetail(detail string) *fence.StaleError {
	se := &fence.StaleError{}
	for _, field := range strings.Fields(detail) {
		k, v, _ := strings.Cut(field, "=")
		switch k {
		case "offered":
			se.Offered, _ = strconv.ParseUint(v, 10, 64)
		case "current":
			se.Current, _ = strconv.ParseUint(v, 10, 64)
		case "table":
			se.Key = v
		}
	}
	return se
}
