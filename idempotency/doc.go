// Package idempotency runs a side effect at most once per key, with the
// outcome kept in PostgreSQL: the last of three layers (lock, fencing,
// idempotency) that make a correctness-critical job run once.
//
//	store, _ := idempotency.Config{Retention: 30 * 24 * time.Hour}.Store(pool)
//	_ = store.Migrate(ctx) // once, at deploy time
//	receipt, err := store.Do(ctx, "charge/sub-42/2026-12", func(ctx context.Context) ([]byte, error) {
//		return provider.Charge(ctx, ...)
//	})
//
// The first Do for a key claims it (one row, inserted atomically), runs fn
// and stores fn's result. Later calls with the same key return the stored
// result without running fn. A call that arrives while the first is still
// running gets ErrInProgress (an *InProgressError naming the claimant), or
// waits for the stored result when Config.Wait is set.
//
// # Failures release the key
//
// When fn returns an error, nothing is stored and the key is released, so
// that a later call may try again: a failed charge should be retryable,
// and fn is expected to fail BEFORE its side effect happens or to have
// undone it. Errors are not cached. If your fn can fail after an
// irreversible effect, return a nil error with a result describing the
// failure instead, so that it is stored.
//
// # Crashes and pauses
//
// A claim is kept alive by a heartbeat every ClaimTTL/3 while fn runs. If
// the process dies, the claim expires after ClaimTTL and the next caller
// runs fn again: the outcome of the crashed run is unknown, so its effect
// may have happened. A process paused longer than ClaimTTL loses its claim
// the same way: fn's context is canceled with cause ErrClaimLost as soon
// as the heartbeat notices, and if another call has claimed the key
// meanwhile, this call's result is not stored (Do returns it together with
// ErrClaimLost). "At most once" is
// therefore exact for runs that finish, and for the rest it rests on the
// effect itself taking the key: pass it on to the payment provider, or do
// the effect in the same database with a unique constraint on the key.
//
// # Retention
//
// Stored results are kept for the retention (Config.Retention, default 24 h);
// after that the key may run again. Purge deletes expired rows; call it
// from a cron job, or let Do reuse expired rows as it meets them.
package idempotency
