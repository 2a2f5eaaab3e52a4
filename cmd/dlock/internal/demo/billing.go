package demo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
)

// The billing scenario's sizes: subscriptions, the period being charged,
// how many subscriptions host A charges before its pause.
const (
	billingSubs       = 10
	billingPeriod     = 202612
	billingPauseAfter = 3
	billingStep       = 20 * time.Millisecond // one charge's latency
)

// runBilling: the double charge of a paused holder. Host A starts the nightly charge,
// pauses past the lock's TTL, host B runs the charge too, A resumes. The
// naive cron double-charges; the layered fix charges each subscription once.
func runBilling(ctx context.Context, e *env) (string, bool, error) {
	naive, err := e.billingRun(ctx, "naive", "billing-naive")
	if err != nil {
		return "", false, err
	}
	fixed, err := e.billingRun(ctx, "fixed", "billing-fixed")
	if err != nil {
		return "", false, err
	}
	v := fmt.Sprintf("naive lock: %d charges for %d subscriptions (%d charged twice); lock + fence-checked last_charged_period + idempotency key: %d charges, %d twice",
		naive.charges, billingSubs, naive.doubled, fixed.charges, fixed.doubled)
	return v, naive.doubled > 0 && fixed.charges == billingSubs && fixed.doubled == 0, nil
}

type billingTally struct{ charges, doubled int }

// billingRun runs hosts A (pausing) and B with role, in its own resource.
func (e *env) billingRun(ctx context.Context, sub, role string) (billingTally, error) {
	db, err := e.billingResource(ctx, sub)
	if err != nil {
		return billingTally{}, err
	}
	e.say("--", "%s: nightly charge of %d subscriptions on two hosts", sub, billingSubs)
	if err := e.billingHosts(ctx, sub, role); err != nil {
		return billingTally{}, err
	}
	var t billingTally
	err = db.QueryRowContext(ctx, `SELECT count(*), (SELECT count(*) FROM
		(SELECT sub FROM charges GROUP BY sub, period HAVING count(*) > 1)) FROM charges`).Scan(&t.charges, &t.doubled)
	return t, err
}

// billingResource opens the run's resource with its subscriptions.
func (e *env) billingResource(ctx context.Context, sub string) (*sql.DB, error) {
	db, err := e.resource(sub)
	if err != nil {
		return nil, err
	}
	for i := 1; i <= billingSubs; i++ {
		if _, err := db.ExecContext(ctx, `INSERT INTO subscriptions (id) VALUES (?)`, i); err != nil {
			return nil, err
		}
	}
	return db, nil
}

// billingHosts: A charges and freezes; once its lock has expired B runs
// the whole charge; then A resumes where it stopped.
func (e *env) billingHosts(ctx context.Context, sub, role string) error {
	name := e.lockName("billing-" + sub)
	common := []string{"--name", name, "--n", strconv.Itoa(billingSubs)}
	a, err := e.spawn(sub, "A", role, append(common, "--pause-after", strconv.Itoa(billingPauseAfter))...)
	if err != nil {
		return err
	}
	if err := e.billingExpiry(ctx, a, sub, name); err != nil {
		return err
	}
	b, err := e.spawn(sub, "B", role, common...)
	if err != nil {
		return err
	}
	if err := e.waitAll(ctx, []*proc{b}, time.Minute); err != nil {
		return err
	}
	e.say("--", "SIGCONT A")
	a.signal(syscall.SIGCONT)
	return e.waitAll(ctx, []*proc{a}, time.Minute)
}

// billingExpiry waits until the frozen host a's lock name has expired: the
// dlock lease, or the naive lock's key (its emulated TTL).
func (e *env) billingExpiry(ctx context.Context, a *proc, sub, name string) error {
	if sub != "naive" {
		return e.waitExpiry(ctx, a, name)
	}
	if err := e.waitExpiry(ctx, a, ""); err != nil {
		return err
	}
	return e.waitNaiveGone(ctx, sub, name)
}

// roleBillingNaive is the team's cron: SET lock 1 EX ttl (skip if held),
// charge every active subscription, DEL lock.
func roleBillingNaive(ctx context.Context, w *worker) error {
	n, err := openNaive(ctx, w.url, w.opts.Dir)
	if err != nil {
		return err
	}
	defer n.Close()
	ok, err := n.SetNX(ctx, w.opts.Name, "1", w.opts.TTL)
	if err != nil {
		return err
	}
	if !ok {
		w.say("SET lock 1 NX EX %s: held; skipping tonight's run", w.opts.TTL)
		return nil
	}
	w.say("SET lock 1 NX EX %s: acquired; charging %d subscriptions", w.opts.TTL, w.opts.N)
	first := 1
	for id := 1; id <= w.opts.N; id++ {
		if id-1 == w.opts.PauseAfter {
			w.say("charged subscriptions %d-%d", first, id-1)
			first = id
			w.freeze()
		}
		time.Sleep(billingStep)
		if _, err := w.res.ExecContext(ctx, `INSERT INTO charges (sub, period, host) VALUES (?, ?, ?)`,
			id, billingPeriod, w.opts.Label); err != nil {
			return err
		}
	}
	w.say("charged subscriptions %d-%d; DEL lock", first, w.opts.N)
	return n.Del(ctx, w.opts.Name)
}

// roleBillingFixed is the layered fix: a correct lock, a fence-checked
// last_charged_period per subscription, and an idempotency key per
// (subscription, period) on the charge itself.
func roleBillingFixed(ctx context.Context, w *worker) error {
	lease, err := w.acquire(ctx)
	var held *dlock.HeldError
	if errors.As(err, &held) {
		w.say("lock held by %s; skipping tonight's run", held.Holder.String())
		return nil
	}
	if err != nil {
		return err
	}
	defer lease.Release(context.Background())
	w.say("acquired fence %d; charging %d subscriptions", lease.Fence(), w.opts.N)
	var charged, skipped []int
	for id := 1; id <= w.opts.N; id++ {
		if id-1 == w.opts.PauseAfter {
			// Say what was done before the pause now, so that the
			// timeline does not credit it to the resumed, stale holder.
			w.say("charged %v before the pause", charged)
			charged = nil
			w.freeze()
		}
		time.Sleep(billingStep)
		ok, err := w.chargeOnce(ctx, id, lease.Fence())
		if err != nil {
			return err
		}
		if ok {
			charged = append(charged, id)
		} else {
			skipped = append(skipped, id)
		}
	}
	w.say("charged %v; refused by the resource (already charged, or a newer fence wrote): %v", charged, skipped)
	return nil
}

// chargeOnce charges subscription id for the period in one transaction,
// only if the subscription row accepts fence f and has not been charged
// for the period; the charge carries an idempotency key as well.
func (w *worker) chargeOnce(ctx context.Context, id int, f uint64) (bool, error) {
	tx, err := w.res.BeginTx(ctx, nil)
	if err != nil {
		return false, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE subscriptions SET last_charged_period = ?1, fence = ?2
		WHERE id = ?3 AND last_charged_period < ?1 AND fence <= ?2`, billingPeriod, int64(f), id)
	if err != nil {
		return false, err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return false, err
	}
	key := fmt.Sprintf("sub-%d-period-%d", id, billingPeriod)
	res, err = tx.ExecContext(ctx, `INSERT INTO charges (sub, period, host, idem_key) VALUES (?, ?, ?, ?)
		ON CONFLICT (idem_key) DO NOTHING`, id, billingPeriod, w.opts.Label, key)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, err
	}
	return n == 1, tx.Commit()
}

// waitNaiveGone waits until the naive lock key has expired on the backend
// (etcd expires leases a little late), so that host B's cron finds it free.
func (e *env) waitNaiveGone(ctx context.Context, sub, key string) error {
	n, err := openNaive(ctx, e.url, filepath.Join(e.dir, sub))
	if err != nil {
		return err
	}
	defer n.Close()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		if _, ok, err := n.Get(ctx, key); err != nil || !ok {
			return err
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("the naive lock %q never expired", key)
}
