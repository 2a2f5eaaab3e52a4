package idempotency

import (
	"context"
	"encoding/json"
	"fmt"
)

// DoJSON is Do for a result that is stored as JSON: fn's value is
// marshalled when stored and unmarshalled for every later caller, so the
// first caller and the replays see the same decoded value.
func DoJSON[T any](ctx context.Context, s *Store, key string, fn func(ctx context.Context) (T, error)) (T, error) {
	var zero T
	if fn == nil {
		return zero, invalid("nil function for key %q", key)
	}
	raw, err := s.Do(ctx, key, func(ctx context.Context) ([]byte, error) {
		v, err := fn(ctx)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	})
	if err != nil {
		return zero, err
	}
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return zero, fmt.Errorf("idempotency: decode the stored result of %q: %w", key, err)
	}
	return v, nil
}
