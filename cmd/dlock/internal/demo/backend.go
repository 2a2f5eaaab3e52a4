package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
)

// backendTimeout bounds connecting to the backend and each administrative
// call (migrate, inspect), as the dlock commands do, so that an
// unreachable server is reported instead of waited on forever.
const backendTimeout = 15 * time.Second

// openLocker opens the backend at url, bounding the connection attempt.
func openLocker(ctx context.Context, url string, opts ...dlock.Option) (*dlock.Locker, error) {
	octx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	l, err := dlock.Open(octx, url, opts...)
	return l, explainTimeout(err)
}

// migrate creates l's schema (the Postgres lease table) if needed: the demo
// must work on a fresh database.
func migrate(ctx context.Context, l *dlock.Locker) error {
	mctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	return explainTimeout(l.Migrate(mctx))
}

// explainTimeout says plainly that the backend did not answer in time.
func explainTimeout(err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer from the backend within %s)", err, backendTimeout)
	}
	return err
}

// errorLine renders err as one line starting with "dlock: ", as the dlock
// command prints its errors, so that a worker's timeline reads the same.
func errorLine(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	if !strings.HasPrefix(msg, "dlock: ") {
		msg = "dlock: " + msg
	}
	for strings.Contains(msg, "dlock: dlock: ") {
		msg = strings.ReplaceAll(msg, "dlock: dlock: ", "dlock: ")
	}
	return msg
}

// randomHex is n random bytes in hex, for lock names unique to a run.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
