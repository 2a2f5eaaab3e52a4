package pglock

import (
	"context"
	"errors"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5"
)

// leases is the lease-mode driver: one row per name in the lease table,
// each operation one statement.
type leases struct {
	base
	acquire, refresh, release, refreshBatch string
	list, inspect, ensureRow, forceRelease  string
}

func newLeases(b base) *leases {
	d := &leases{base: b}
	d.acquire, d.refresh, d.release = d.sql(leaseAcquire), d.sql(leaseRefresh), d.sql(leaseRelease)
	d.refreshBatch, d.list, d.inspect = d.sql(leaseRefreshBatch), d.sql(leaseList), d.sql(leaseInspect)
	d.ensureRow, d.forceRelease = d.sql(leaseEnsureRow), d.sql(leaseForceRelease)
	return d
}

// TryAcquire makes one attempt: one statement that grants or names the
// holder.
func (d *leases) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	var (
		won    bool
		fence  int64
		owner  string
		micros int64
	)
	err := d.pool.QueryRow(ctx, d.acquire, req.Name, req.Token, req.Owner, req.TTL.Microseconds()).
		Scan(&won, &fence, &owner, &micros)
	if errors.Is(err, pgx.ErrNoRows) {
		// The holder committed after this statement's snapshot: held,
		// holder unknown.
		return driver.Grant{Holder: driver.Holder{Name: req.Name, TTL: -1}}, nil
	}
	if err != nil {
		return driver.Grant{}, err
	}
	if won {
		return driver.Grant{Acquired: true, Fence: uint64(fence)}, nil
	}
	return driver.Grant{Holder: holder(req.Name, owner, fence, micros)}, nil
}

func holder(name, owner string, fence, micros int64) driver.Holder {
	ttl := time.Duration(-1)
	if micros >= 0 {
		ttl = time.Duration(micros) * time.Microsecond
	}
	return driver.Holder{Name: name, Owner: owner, Fence: uint64(fence), TTL: ttl}
}

// Refresh extends token's lease to ttl from now by the database clock. It
// never revives an expired lease.
func (d *leases) Refresh(ctx context.Context, name, token string, ttl time.Duration) error {
	var (
		ok      bool
		current *string
	)
	if err := d.pool.QueryRow(ctx, d.refresh, name, token, ttl.Microseconds()).Scan(&ok, &current); err != nil {
		return err
	}
	if ok {
		return nil
	}
	return notHeld(token, current)
}

// notHeld says why token does not hold a row whose token is current.
func notHeld(token string, current *string) error {
	if current == nil || *current == token {
		return driver.ErrExpired
	}
	return driver.ErrTakenOver
}

// Release frees token's row (keeping its fence) and notifies waiters.
// Releasing a lease that expired but was not taken over succeeds.
func (d *leases) Release(ctx context.Context, name, token string) error {
	var (
		ok      bool
		current *string
	)
	if err := d.pool.QueryRow(ctx, d.release, name, token, d.channel).Scan(&ok, &current); err != nil {
		return err
	}
	if ok {
		return nil
	}
	return notHeld(token, current)
}

// Close stops the listener, and closes the pool when it was opened from a
// URL.
func (d *leases) Close() error { return d.close() }

// Migrate creates the lease table if it does not exist.
func (d *leases) Migrate(ctx context.Context) error { return d.migrate(ctx, leaseDDL) }
