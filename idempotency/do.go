package idempotency

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// releaseTimeout bounds the writes that end a claim, which run detached
// from the caller's cancellation so that a canceled call still frees its
// key.
const releaseTimeout = 5 * time.Second

// Do runs fn at most once for key and returns its result; later calls with
// the same key (within the retention) return the stored result without
// running fn. See the package documentation for failures, crashes and
// concurrent duplicates.
func (s *Store) Do(ctx context.Context, key string, fn func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	if key == "" {
		return nil, invalid("empty idempotency key")
	}
	if fn == nil {
		return nil, invalid("nil function for key %q", key)
	}
	deadline := time.Now().Add(s.cfg.Wait)
	for attempt := 0; ; attempt++ {
		token := newToken()
		claimed, err := s.claim(ctx, key, token)
		if err != nil {
			return nil, err
		}
		if claimed {
			return s.run(ctx, key, token, fn)
		}
		res, done, ip, err := s.lookup(ctx, key)
		switch {
		case err != nil:
			return nil, err
		case done:
			return res, nil
		case ip == nil: // released or expired since the claim: try again
			continue
		case !time.Now().Before(deadline):
			return nil, ip
		}
		if err := pause(ctx, attempt, deadline); err != nil {
			return nil, errors.Join(ip, err)
		}
	}
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// claim inserts a running row for key, or takes over an expired one.
func (s *Store) claim(ctx context.Context, key, token string) (bool, error) {
	sql := `INSERT INTO ` + s.table + ` AS r (key, state, token, owner, started_at, expires_at)
VALUES ($1, 'running', $2, $3, now(), now() + $4 * interval '1 millisecond')
ON CONFLICT (key) DO UPDATE SET state = 'running', token = EXCLUDED.token, owner = EXCLUDED.owner,
	result = NULL, started_at = EXCLUDED.started_at, finished_at = NULL, expires_at = EXCLUDED.expires_at
WHERE r.expires_at < now()
RETURNING true`
	var ok bool
	err := s.db.QueryRow(ctx, sql, key, token, s.cfg.Owner, ms(s.cfg.ClaimTTL)).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("idempotency: claim %q: %w", key, err)
	}
	return true, nil
}

// lookup reads key's row: its stored result, or who is running it. Both
// are zero when the row is gone or expired.
func (s *Store) lookup(ctx context.Context, key string) (res []byte, done bool, ip *InProgressError, err error) {
	sql := `SELECT state, result, owner, started_at FROM ` + s.table + ` WHERE key = $1 AND expires_at >= now()`
	var state, owner string
	var since time.Time
	err = s.db.QueryRow(ctx, sql, key).Scan(&state, &res, &owner, &since)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil, nil
	case err != nil:
		return nil, false, nil, fmt.Errorf("idempotency: look up %q: %w", key, err)
	case state == "done":
		if res == nil {
			res = []byte{}
		}
		return res, true, nil, nil
	}
	return nil, false, &InProgressError{Key: key, Owner: owner, Since: since}, nil
}

// pause sleeps before polling a running key again: capped exponential
// backoff, never past the wait deadline.
func pause(ctx context.Context, attempt int, deadline time.Time) error {
	d := min(10*time.Millisecond<<min(attempt, 6), 500*time.Millisecond, time.Until(deadline))
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
