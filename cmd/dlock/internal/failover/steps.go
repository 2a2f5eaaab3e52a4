package failover

import (
	"context"
)

// failover plays the steps after the start: a steady state, a SIGKILL of
// the first replica (the one the first clients and workers start on),
// force-releases while the clients move, then the restarts. Each step
// ends once every client is streaming or has lost its lease (bounded by
// cfg.Settle), plus cfg.Dwell.
func (r *run) failover(ctx context.Context) error {
	sleep(ctx, r.cfg.Steady)
	r.rs[0].kill()
	first := r.cfg.Victims
	if r.cfg.RollingRestart {
		first = (r.cfg.Victims + 1) / 2
	}
	r.forceVictims(ctx, first)
	r.step(ctx)
	if !r.cfg.RollingRestart {
		if err := r.rs[0].start(ctx); err != nil {
			return err
		}
		r.step(ctx)
		return nil
	}
	return r.rollingRestart(ctx, r.cfg.Victims-first)
}

// rollingRestart stops each replica with SIGTERM (the killed one is down
// already), force-releases a share of victims while it is down, starts it
// again on the same port with the same files, and lets the clients settle.
func (r *run) rollingRestart(ctx context.Context, victims int) error {
	for i, rp := range r.rs {
		if err := rp.terminate(); err != nil {
			return err
		}
		share := victims / (len(r.rs) - i)
		r.forceVictims(ctx, share)
		victims -= share
		if err := rp.start(ctx); err != nil {
			return err
		}
		r.step(ctx)
	}
	return nil
}

// step waits for the clients to settle, counting those that do not, then
// lets the run go on for cfg.Dwell. With no replica running (one replica,
// killed) nobody can settle: it only dwells.
func (r *run) step(ctx context.Context) {
	if len(r.rs.live()) > 0 {
		r.notSettled += r.settle(ctx)
	}
	sleep(ctx, r.cfg.Dwell)
}
