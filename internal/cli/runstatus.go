package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/dlockdev/dlock"
)

// statusInterval is how often the waiting status line is refreshed.
const statusInterval = time.Second

// showWaiting keeps a one-line status ("waiting for NAME, held by OWNER,
// fence N, 12s left") updated in place on a terminal until stop is called;
// stop erases it.
func showWaiting(ctx context.Context, l *dlock.Locker, name string, w io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(statusInterval)
		defer t.Stop()
		for {
			fmt.Fprint(w, "\r\x1b[K"+waitingLine(ctx, l, name))
			select {
			case <-ctx.Done():
				fmt.Fprint(w, "\r\x1b[K")
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-finished }
}

func waitingLine(ctx context.Context, l *dlock.Locker, name string) string {
	ictx, cancel := context.WithTimeout(ctx, statusInterval)
	defer cancel()
	h, ok, err := l.Inspect(ictx, name)
	switch {
	case err != nil:
		return fmt.Sprintf("waiting for %s", name)
	case !ok:
		return fmt.Sprintf("waiting for %s (just freed)", name)
	}
	return fmt.Sprintf("waiting for %s, held by %s", name, h.String())
}
