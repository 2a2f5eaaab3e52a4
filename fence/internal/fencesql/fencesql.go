// Package fencesql builds what pgfence and sqlitefence share of a fenced
// SQL statement: validated, quoted names and the ordered arguments. Each
// package keeps its own SQL dialect and identifier quoting.
package fencesql

import (
	"fmt"
	"maps"
	"slices"

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
