package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/dlockdev/dlock"
)

// backendTimeout bounds connecting to the backend and each administrative
// call (ls, inspect, release, migrate), so that an unreachable server is
// reported instead of waited on forever.
const backendTimeout = 15 * time.Second

// openLocker opens the backend named by url ("" means $DLOCK_URL, then the
// embedded default), bounding the connection attempt.
func openLocker(ctx context.Context, url string, opts ...dlock.Option) (*dlock.Locker, error) {
	octx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	l, err := dlock.Open(octx, url, opts...)
	return l, explainTimeout(octx, err)
}

// withLocker opens the backend at url ("" means $DLOCK_URL, then the
// embedded default), calls f with it and a context bounding the call by
// backendTimeout, closes it, and says plainly when the backend did not
// answer in time. It is the opening of every administrative command.
func withLocker(ctx context.Context, url string, f func(ctx context.Context, l *dlock.Locker) error) error {
	l, err := openLocker(ctx, url)
	if err != nil {
		return err
	}
	defer l.Close()
	bctx, cancel := context.WithTimeout(ctx, backendTimeout)
	defer cancel()
	return explainTimeout(bctx, f(bctx, l))
}

// explainTimeout says plainly that the backend did not answer within
// backendTimeout, when ctx (the call's, bounded by it) ran out; a
// driver's own shorter timeout (a dial_timeout) has said so itself.
func explainTimeout(ctx context.Context, err error) error {
	if err != nil && errors.Is(err, context.DeadlineExceeded) && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w (no answer from the backend within %s)", err, backendTimeout)
	}
	return err
}

// quietClients stops backend client libraries from logging on stderr:
// the CLI reports every failure itself, in one line. Drivers' warnings
// (log/slog, e.g. redislock's note on a Redis without persistence) and
// the client libraries' lines the drivers route to slog (go-redis's, at
// Debug) would otherwise repeat on every cron run; DLOCK_DEBUG=1 shows
// them.
// Process-wide by nature: what it quiets (package log, go-redis's one logger, drivers opened by demo and bench) is the process's.
func quietClients() {
	if os.Getenv("DLOCK_DEBUG") != "1" {
		slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	}
}
