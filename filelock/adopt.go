package filelock

import (
	"context"
	"database/sql"
	"errors"

	"github.com/dlockdev/dlock/driver"
)

// adoptSQL is refreshSQL returning the grant's fence: a token-checked
// extension that never revives a lease.
const adoptSQL = `UPDATE dlock_leases SET expires_at = ` + nowMS + ` + ?3
WHERE name = ?1 AND token = ?2 AND expires_at > ` + nowMS + `
RETURNING fence`

// Adopt extends a live lease held by req.Token, as Refresh does, and
// returns its fence; the lease is a row, owned by no connection.
func (d *fileDriver) Adopt(ctx context.Context, req driver.Request, _ uint64) (driver.Grant, error) {
	var fence int64
	err := d.stmts.adopt.QueryRowContext(ctx, req.Name, req.Token, millis(req.TTL)).Scan(&fence)
	switch {
	case err == nil:
		return driver.Grant{Acquired: true, Fence: uint64(fence)}, nil
	case errors.Is(err, sql.ErrNoRows):
		return driver.Grant{}, whyNotHeld(ctx, d.stmts.state, req.Name, req.Token)
	}
	return driver.Grant{}, err
}
