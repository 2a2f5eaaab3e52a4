package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/pgfence"
	"github.com/dlockdev/dlock/idempotency"
	"github.com/jackc/pgx/v5/pgxpool"
)

var subscriptions = pgfence.Table{Name: "subscriptions", Key: "id", Fence: "fence"}

// fixed is the layered fix: (a) a correct lock (token, TTL, token-checked
// release, fencing token); (b) every write to a subscription carries the
// lease's fence, and the trigger on subscriptions rejects lower ones, so a
// host whose lease expired is stopped at its next write; (c) each charge
// goes through an idempotency key per subscription and period, so a charge
// that a stale host and the new holder both reach happens once. The lock
// runs WITHOUT auto-refresh here so that the injected pause really expires
// it: the fix must hold even then.
func fixed(ctx context.Context, db *pgxpool.Pool, o options, out io.Writer) error {
	locker, err := dlock.Open(ctx, o.lockURL, dlock.WithTTL(o.ttl), dlock.WithAutoRefresh(false),
		dlock.WithOwner("billing host "+o.host))
	if err != nil {
		return err
	}
	defer locker.Close()
	lease, err := locker.TryAcquire(ctx, "billing")
	if errors.Is(err, dlock.ErrNotAcquired) {
		fmt.Fprintf(out, "host %s: skipping: %v\n", o.host, err)
		return nil
	}
	if err != nil {
		return err
	}
	defer lease.Release(context.Background()) // token-checked: never frees another host's lock
	fmt.Fprintf(out, "host %s: acquired billing, fence %d\n", o.host, lease.Fence())
	store, err := idempotency.Config{Owner: "billing host " + o.host}.Store(db)
	if err != nil {
		return err
	}
	b := biller{db: db, store: store, o: o, fence: lease.Fence(), out: out}
	return b.runAll(ctx)
}

type biller struct {
	db    *pgxpool.Pool
	store *idempotency.Store
	o     options
	fence uint64
	out   io.Writer
	n     int // charged by this host
	dup   int // charges found already made (idempotency replays)
}

func (b *biller) runAll(ctx context.Context) error {
	subs, err := due(ctx, b.db, b.o.period)
	if err != nil {
		return err
	}
	for k, sub := range subs {
		err := b.one(ctx, k+1, sub)
		if errors.Is(err, fence.ErrStale) {
			fmt.Fprintf(b.out, "host %s: fenced off at subscription %d: %v\n", b.o.host, sub, err)
			break
		}
		if err != nil {
			return err
		}
	}
	fmt.Fprintf(b.out, "host %s: done, charged %d, replayed %d\n", b.o.host, b.n, b.dup)
	return nil
}

// one claims sub with this host's fence, charges it under its idempotency
// key, and records the period, again fenced.
func (b *biller) one(ctx context.Context, k, sub int) error {
	tag, err := b.db.Exec(ctx, `UPDATE subscriptions SET fence = $2 WHERE id = $1 AND last_charged_period < $3`,
		sub, int64(b.fence), b.o.period)
	if err != nil {
		return pgfence.MapError(err) // the trigger: a newer lease has written
	}
	if tag.RowsAffected() == 0 {
		return nil // charged already, by another host
	}
	pauseAt(b.o, k, b.out)
	key := fmt.Sprintf("charge/%d/%s", sub, b.o.period)
	ran := false
	_, err = b.store.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		ran = true
		id, err := charge(ctx, b.db, sub, b.o.period, b.o.host)
		return []byte(strconv.FormatInt(id, 10)), err
	})
	if errors.Is(err, idempotency.ErrInProgress) {
		fmt.Fprintf(b.out, "host %s: subscription %d is being charged elsewhere: %v\n", b.o.host, sub, err)
		return nil
	}
	if err != nil {
		return err
	}
	if ran {
		b.n++
	} else {
		b.dup++
	}
	return subscriptions.Update(ctx, b.db, sub, b.fence, pgfence.Values{"last_charged_period": b.o.period})
}
