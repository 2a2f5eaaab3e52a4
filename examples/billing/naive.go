package main

import (
	"context"
	"fmt"
	"io"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
)

// naive is the cron as a team first writes it: SET lock 1 NX EX (skip if
// taken), charge every due subscription, plain DEL. Nothing checks that
// the lock is still held, and the DEL deletes whoever's lock is there.
func naive(ctx context.Context, db *pgxpool.Pool, o options, out io.Writer) error {
	opt, err := redis.ParseURL(o.redisURL)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	ok, err := rdb.SetNX(ctx, "lock:billing", "1", o.ttl).Result()
	if err != nil {
		return err
	}
	if !ok {
		fmt.Fprintf(out, "host %s: lock taken, skipping\n", o.host)
		return nil
	}
	fmt.Fprintf(out, "host %s: acquired lock:billing\n", o.host)
	defer rdb.Del(context.Background(), "lock:billing") // bug 2: may be someone else's
	subs, err := due(ctx, db, o.period)
	if err != nil {
		return err
	}
	n := 0
	for k, sub := range subs {
		pauseAt(o, k+1, out)
		if _, err := charge(ctx, db, sub, o.period, o.host); err != nil {
			return err
		}
		if _, err := db.Exec(ctx, `UPDATE subscriptions SET last_charged_period = $2 WHERE id = $1`, sub, o.period); err != nil {
			return err
		}
		n++
	}
	fmt.Fprintf(out, "host %s: done, charged %d\n", o.host, n)
	return nil
}
