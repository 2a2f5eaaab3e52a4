package failover

import (
	"time"
)

// result gathers what the clients, the load and the ledger saw.
func (r *run) result(took time.Duration) Result {
	c := r.cfg
	res := Result{
		Backend: c.Backend, Replicas: c.Replicas(), Killed: 1, LeaseKeyFile: c.LeaseKeyFile,
		RollingRestart: c.RollingRestart, Clients: c.Clients, HeldTTLMs: c.HeldTTL.Milliseconds(),
		LoadRate: c.LoadRate, LoadNames: c.LoadNames, LoadTTLMs: c.LoadTTL.Milliseconds(),
		Seconds:    float64(took.Round(100*time.Millisecond)) / float64(time.Second),
		NotSettled: r.notSettled, ForceReleased: r.forced, ForceErrors: r.forceErr,
	}
	r.holderResults(&res)
	r.loadResults(&res)
	res.FenceInversions, res.Overlaps, res.Grants = r.ledger.DoubleGrants()
	res.DoubleGrants = res.FenceInversions + res.Overlaps
	return res
}

// holderResults counts the losses, the breaks and the lost pushes.
func (r *run) holderResults(res *Result) {
	var backs, pushes []time.Duration
	for _, h := range r.holders {
		h.mu.Lock()
		res.Breaks += len(h.backs)
		if !h.brokeAt.IsZero() {
			res.Breaks++ // broke and never came back
		}
		backs = append(backs, h.backs...)
		res.HolderErrors += h.errs
		switch {
		case h.state != lost:
		case !h.forced.IsZero():
			pushes = append(pushes, h.push)
		default:
			res.LeasesLost++
			if res.LostBy == nil {
				res.LostBy = map[string]int{}
			}
			res.LostBy[h.cause]++
		}
		h.mu.Unlock()
	}
	res.Back, res.PushHeard = len(backs), len(pushes)
	res.BackP50Ms, res.BackP99Ms, res.BackMaxMs = percentiles(backs)
	res.PushP50Ms, res.PushP99Ms, _ = percentiles(pushes)
}

// loadResults summarises the load's cycles.
func (r *run) loadResults(res *Result) {
	s := &r.load
	s.mu.Lock()
	defer s.mu.Unlock()
	res.Acquires = len(s.latencies)
	res.AcquireP50Ms, res.AcquireP99Ms, _ = percentiles(s.latencies)
	res.Busy, res.AcquireUnreachable, res.ReleaseFailed = s.busy, s.unreachable, s.releaseFailed
	if len(s.statuses) > 0 {
		res.AcquireFailed = s.statuses
	}
	if r.loadTook > 0 {
		res.CyclesPerSecond = float64(int(float64(res.Acquires)/r.loadTook.Seconds()*10)) / 10
	}
}
