package fencesql

import (
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/fence"
)

// CurrentSQL reads the fence of the statement's row; param is the dialect's
// first parameter ("$1" or "?1").
func (s Stmt) CurrentSQL(param string) string {
	return fmt.Sprintf("SELECT %s FROM %s WHERE %s = %s", s.Fence, s.Table, s.Key, param)
}

// Rejected explains a fenced write that matched no row, from the read of
// the current fence that followed it (cur, err): no such row (err matches
// noRows, the database package's own error), the read failed, or a higher
// fence has written (a *fence.StaleError). pkg prefixes the message.
func Rejected(pkg, table, keyCol string, key any, f uint64, cur int64, err, noRows error) error {
	if errors.Is(err, noRows) {
		return fmt.Errorf("%s: %s: no row with %s = %v: %w", pkg, table, keyCol, key, noRows)
	}
	if err != nil {
		return fmt.Errorf("%s: %s: write with fence %d matched no row, and reading the current fence failed: %w", pkg, table, f, err)
	}
	return &fence.StaleError{Key: fmt.Sprintf("%s[%v]", table, key), Offered: f, Current: uint64(cur)}
}
