package rediscore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed held.lua
	heldSrc string
	//go:embed refresh.lua
	refreshSrc string
	//go:embed refresh_batch.lua
	refreshBatchSrc string
	//go:embed adopt.lua
	adoptSrc string
	//go:embed ledger.lua
	ledgerSrc string
	//go:embed claim_run.lua
	claimRunSrc string
	//go:embed finish_run.lua
	finishRunSrc string
)

// The scripts both drivers run. Each file documents its KEYS, ARGV and
// reply.
var (
	// Refresh extends one lock for its holder, named by a Mark.
	Refresh = WithTokenCheck(refreshSrc)
	// RefreshBatch is Refresh for many locks in one call.
	RefreshBatch = WithTokenCheck(refreshBatchSrc)
	// Adopt is Refresh answering the lock's value (Adopted reads it).
	Adopt = WithTokenCheck(adoptSrc)
	// ClaimRun and FinishRun are the run ledger's writes (driver.Ledger),
	// each appended to the functions they share (ledger.lua).
	ClaimRun  = redis.NewScript(ledgerSrc + claimRunSrc)
	FinishRun = redis.NewScript(ledgerSrc + finishRunSrc)
)

// WithTokenCheck returns the script src with the token check prepended:
// src may call held(value, mark) to tell whether a lock value belongs to
// the holder that mark (Mark) names.
func WithTokenCheck(src string) *redis.Script { return redis.NewScript(heldSrc + src) }

// Load caches scripts on the server (on every master of a Cluster), so
// that the first EVALSHA of each does not cost a NOSCRIPT round trip.
// Callers run a script with its Run, which sends EVALSHA and falls back to
// EVAL (which also caches it again) when the server answers NOSCRIPT,
// e.g. after a restart or SCRIPT FLUSH.
func Load(ctx context.Context, c redis.Scripter, scripts ...*redis.Script) error {
	for _, s := range scripts {
		if err := s.Load(ctx, c).Err(); err != nil {
			return err
		}
	}
	return nil
}

// Adopted reads the reply of Adopt: the lock's value, or the code that
// says why the mark does not hold it (0 gone, -1 another token).
func Adopted(reply any) (v Value, code int64, err error) {
	switch r := reply.(type) {
	case string:
		v, err = ParseValue(r)
		return v, 1, err
	case int64:
		return Value{}, r, nil
	}
	return Value{}, 0, fmt.Errorf("rediscore: adopt answered %T", reply)
}
