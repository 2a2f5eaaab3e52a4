package pglock

import (
	"context"

	"github.com/dlockdev/dlock/driver"
)

var _ driver.Adopter = (*leases)(nil)

// leaseAdopt is leaseRefresh answering the row's fence: $2's unexpired
// lease extended by $3 microseconds, its fence (NULL when $2 does not
// hold it) and the token holding the row, to say why not.
const leaseAdopt = `
WITH r AS (
	UPDATE {{table}} SET expires_at = clock_timestamp() + $3::bigint * interval '1 microsecond'
	WHERE name = $1 AND token = $2 AND expires_at > clock_timestamp()
	RETURNING fence
)
SELECT (SELECT fence FROM r), (SELECT token FROM {{table}} WHERE name = $1)`

// Adopt extends token's lease, as Refresh does, in one token-checked
// UPDATE that also answers its fence. A lease is a row, owned by no
// connection: the adopter's pool keeps it from then on.
func (d *leases) Adopt(ctx context.Context, req driver.Request, _ uint64) (driver.Grant, error) {
	var (
		fence   *int64
		current *string
	)
	if err := d.pool.QueryRow(ctx, d.sql(leaseAdopt), req.Name, req.Token, req.TTL.Microseconds()).Scan(&fence, &current); err != nil {
		return driver.Grant{}, d.classify(err)
	}
	if fence == nil {
		return driver.Grant{}, notHeld(req.Token, current)
	}
	return driver.Grant{Acquired: true, Fence: uint64(*fence)}, nil
}
