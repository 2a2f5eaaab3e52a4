package demo

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/sqlitefence"
)

// runFencing: the same pause, but the register checks fences: A's late
// write with the older fence is rejected.
func runFencing(ctx context.Context, e *env) (string, bool, error) {
	log, err := e.pauseAndWrite(ctx, "fenced-write")
	if err != nil {
		return "", false, err
	}
	value, f, err := registerValue(ctx, e.res, reportKey)
	if err != nil {
		return "", false, err
	}
	if !staleWrite(log, false) {
		return fmt.Sprintf("expected B's write accepted and A's rejected, got %v", log), false, nil
	}
	return fmt.Sprintf("stale write rejected at the resource: A's fence %d < %d; the report keeps B's %q (fence %d)",
		log[1].fence, log[0].fence, value, f), true, nil
}

func (w *worker) fencedWrite(ctx context.Context, key string, f uint64, value string) error {
	err := registerTable.Upsert(ctx, w.res, key, f, sqlitefence.Values{"value": value})
	var stale *fence.StaleError
	switch {
	case errors.As(err, &stale):
		w.say("write %q with fence %d REJECTED by the resource: fence %d has written since", value, f, stale.Current)
		return w.logWrite(ctx, f, value, false)
	case err != nil:
		return err
	}
	w.say("wrote %q (fence %d, accepted by the fenced register)", value, f)
	return w.logWrite(ctx, f, value, true)
}
