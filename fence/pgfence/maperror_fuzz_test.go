package pgfence_test

import (
	"errors"
	"testing"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/pgfence"
	"github.com/jackc/pgx/v5/pgconn"
)

// FuzzMapError maps server errors carrying fuzzed SQLSTATEs and details
// (the detail is text the trigger built from stored data): only the
// trigger's SQLSTATE becomes a stale-fence error, which still unwraps to
// the *pgconn.PgError; anything else is returned unchanged.
func FuzzMapError(f *testing.F) {
	f.Add(pgfence.SQLState, "offered=3 current=9 table=docs")
	f.Add(pgfence.SQLState, "offered=x current=")
	f.Add("23505", "duplicate key")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, code, detail string) {
		pe := &pgconn.PgError{Code: code, Detail: detail, Message: "m"}
		err := pgfence.MapError(pe)
		var back *pgconn.PgError
		if !errors.As(err, &back) || back != pe {
			t.Fatalf("MapError lost the *pgconn.PgError: %v", err)
		}
		if stale := errors.Is(err, fence.ErrStale); stale != (code == pgfence.SQLState) {
			t.Fatalf("MapError(code %q): stale = %v", code, stale)
		}
		_ = err.Error()
	})
}
