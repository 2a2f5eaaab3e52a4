package idempotency

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// run executes fn under the claim (key, token), heartbeating it, and
// stores the result or releases the key.
func (s *Store) run(ctx context.Context, key, token string, fn func(context.Context) ([]byte, error)) (res []byte, err error) {
	fctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := s.heartbeat(fctx, key, token, cancel)
	finished := false
	defer func() {
		stop()
		if !finished { // fn panicked: free the key, then let the panic go on
			s.release(ctx, key, token)
		}
	}()
	res, err = fn(fctx)
	finished = true
	stop()
	if err != nil {
		s.release(ctx, key, token)
		return nil, err
	}
	if res == nil {
		res = []byte{}
	}
	// Store even if the heartbeat saw the claim lapse: the token still
	// matching means nobody else claimed the key, so fn ran only here.
	return res, s.store(ctx, key, token, res)
}

// heartbeat extends the claim every ClaimTTL/3 until stop is called;
// a refused extension cancels fn's context with ErrClaimLost.
func (s *Store) heartbeat(ctx context.Context, key, token string, lose context.CancelCauseFunc) (stop func()) {
	hctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(s.cfg.ClaimTTL / 3)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			if err := s.extend(hctx, key, token); errors.Is(err, ErrClaimLost) {
				lose(err)
				return
			}
		}
	})
	return func() { cancel(); wg.Wait() }
}

func (s *Store) extend(ctx context.Context, key, token string) error {
	sql := `UPDATE ` + s.table + ` SET expires_at = now() + $3 * interval '1 millisecond'
WHERE key = $1 AND token = $2 AND state = 'running' AND expires_at >= now()`
	tag, err := s.db.Exec(ctx, sql, key, token, ms(s.cfg.ClaimTTL))
	if err != nil {
		return err // transient: the next beat tries again
	}
	if tag.RowsAffected() == 0 {
		return ErrClaimLost
	}
	return nil
}

// store records fn's result if the claim is still ours.
func (s *Store) store(ctx context.Context, key, token string, res []byte) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	sql := `UPDATE ` + s.table + ` SET state = 'done', result = $3, finished_at = now(),
	expires_at = now() + $4 * interval '1 millisecond' WHERE key = $1 AND token = $2`
	tag, err := s.db.Exec(wctx, sql, key, token, res, ms(s.cfg.Retention))
	if err != nil {
		return fmt.Errorf("idempotency: store the result of %q: %w", key, err)
	}
	if tag.RowsAffected() == 0 {
		return ErrClaimLost
	}
	return nil
}

// release frees key after fn failed, so that it may be retried.
func (s *Store) release(ctx context.Context, key, token string) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_, _ = s.db.Exec(rctx, `DELETE FROM `+s.table+` WHERE key = $1 AND token = $2`, key, token)
}
