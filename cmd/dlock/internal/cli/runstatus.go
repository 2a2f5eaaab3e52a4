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
// stop erases it. kind is what is waited for: the mutex, a permit or a term.
func showWaiting(ctx context.Context, l *dlock.Locker, name string, kind dlock.Kind, w io.Writer) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(statusInterval)
		defer t.Stop()
		for {
			fmt.Fprint(w, "\r\x1b[K"+waitingLine(ctx, l, name, kind))
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

func waitingLine(ctx context.Context, l *dlock.Locker, name string, kind dlock.Kind) string {
	ictx, cancel := context.WithTimeout(ctx, statusInterval)
	defer cancel()
	what := "waiting for " + name
	switch kind {
	case dlock.KindPermit:
		what = "waiting for a permit of " + name
	case dlock.KindLeader:
		what = "campaigning to lead " + name
	}
	hs, err := grantsOf(ictx, l, name)
	hs = ofKind(hs, kind)
	switch {
	case err != nil:
		return what
	case len(hs) == 0:
		return what + " (just freed)"
	case kind == dlock.KindPermit:
		return fmt.Sprintf("%s (%d held), one by %s", what, len(hs), hs[0].String())
	}
	return fmt.Sprintf("%s, held by %s", what, hs[0].String())
}
