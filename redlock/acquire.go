package redlock

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// TryAcquire makes one Redlock attempt: phase 1 on every node in parallel,
// then, when fencing and the counters disagree, phase 2 on the nodes that
// need it. It returns as soon as the outcome is decided; a failed attempt
// releases the lock on every node it may have reached.
//
// # Why the fences increase
//
// Each node keeps a fence counter beside the lock key. Phase 1 takes the
// key and increments the counter in one atomic step, and replies with the
// counter's new value v. Once a majority C has granted, the fence is
// f = max{v : v from C}. A granted node with v == f already holds a
// counter ≥ f while the key is ours; one with v < f gets phase 2, which
// raises its counter to f if the key is still ours. The lease is returned
// only when a majority P of nodes is known to have had, in one atomic
// step, the key set to our token and a counter ≥ f. (A node whose v > f
// cannot be in P; phase 2 still records f in its lock value, for holders'
// descriptions, but its counter keeps v.)
//
// Claim 1 (real-time order): if grant G1 was returned before grant G2's
// phase 1 started, then f2 > f1. P1 and C2 are majorities, so they share
// a node m. At m, G1's P-step happened before G1 returned, so before G2's
// phase 1 at m, which increments a counter that was ≥ f1: v2(m) ≥ f1 + 1,
// and f2 ≥ v2(m).
//
// Claim 2 (no two returned grants share a fence, even when they overlap,
// e.g. because a node's clock jumped and a key vanished early): P1 and P2
// share a node m. Each grant's P-step at m happened while m's key held
// that grant's token, so one token's time at m ended before the other's
// began; say G1's came first. G2's phase 1 at m happened in G2's time, so
// after G1's P-step: v2(m) ≥ f1 + 1, and m ∈ P2 means f2 ≥ v2(m) > f1.
//
// So a resource that rejects fences lower than the highest it has seen
// rejects a stale holder's writes once a newer holder has written, even
// when Redlock's own timing assumptions failed and both believe they hold
// the lock. Assumptions: counters never decrease. INCR and phase 2 only
// raise them; a node that lost its counter (restarted without persistence)
// seeds it from its clock in microseconds, which must then exceed every
// value the counter held: true while node clocks never go backwards, agree
// to within the time since the name's counters were first seeded, and a
// name is granted less than once per microsecond. A counter lost and
// re-seeded lower (a clock set back) can break both claims.
//
// In the common case, with every node's counter equal, v == f on the
// whole majority and phase 2 costs nothing: one round trip. Counters
// diverge when they are first seeded (each node's clock), after failed or
// split attempts and after a node restart; once a grant's requests have
// all landed, the nodes it holds are raised in the background to the
// highest value any of them returned (level), so that the next grant
// finds them equal again. Raising a counter is always safe.
func (d *redlock) TryAcquire(ctx context.Context, req driver.Request) (driver.Grant, error) {
	start := time.Now()
	a := d.newAttempt(ctx, req)
	g, err := a.decide(ctx, start)
	if err == nil && g.Acquired {
		d.track(req.Token, a)
		if d.cfg.fencing {
			d.bg.Add(1)
			go a.level()
		}
	}
	failed := err != nil || !g.Acquired
	a.finish(failed)
	if failed {
		// The workers release every node that granted. A caller whose
		// deadline has passed does not wait for them.
		a.settle(ctx)
	}
	took := time.Since(start)
	d.observe(took)
	if err == nil && !g.Acquired {
		d.hub.refused(req.Name)
		if a.split {
			d.hub.nudge(req.Name, took)
		}
	}
	return g, err
}

// p1 is one node's answer to phase 1.
type p1 struct {
	node    int
	granted bool
	value   uint64 // the node's counter after the bump (granted)
	holder  driver.Holder
	err     error
	skipped bool // not asked: the gate refused (gate mode)
}

// attempt is one TryAcquire: the caller's goroutine decides, one worker
// per node talks to it.
type attempt struct {
	d       *redlock
	req     driver.Request
	seq     string          // this attempt's number among the token's attempts
	ctx     context.Context // for node requests: the caller's values, not its cancellation
	waiting <-chan struct{} // the caller's ctx.Done(): closed once nobody reads the errors
	phase1  chan p1
	phase2  chan bool
	decided chan struct{} // closed once fence or aborted is set
	fence   uint64
	aborted bool
	final   chan struct{} // closed once failed is set
	failed  bool
	split   bool // some nodes granted, too few: nobody may hold a majority

	nodeDone []chan struct{} // closed when node i's worker is done with phases 1 and 2
	settled  chan struct{}   // one send per worker, once it is done (and has released)
	results  []p1            // node i's phase-1 answer, readable once nodeDone[i] is closed

	gate     int           // the gate node in gate mode, else -1 (see gate.go)
	gateDone chan struct{} // closed once gateOpen is set
	gateOpen bool
}

func (d *redlock) newAttempt(ctx context.Context, req driver.Request) *attempt {
	n := len(d.nodes)
	a := &attempt{
		d: d, req: req, ctx: context.WithoutCancel(ctx), waiting: ctx.Done(),
		seq:    strconv.FormatUint(d.attempts.Add(1), 10),
		phase1: make(chan p1, n), phase2: make(chan bool, n),
		decided: make(chan struct{}), final: make(chan struct{}),
		gate: -1, gateDone: make(chan struct{}), nodeDone: make([]chan struct{}, n),
		results: make([]p1, n), settled: make(chan struct{}, n),
	}
	for i := range a.nodeDone {
		a.nodeDone[i] = make(chan struct{})
	}
	if d.hub.contended(req.Name) {
		a.gate = d.gateOf(req.Name)
	}
	d.bg.Add(n)
	for i := range n {
		go a.work(i)
	}
	return a
}

// work is node i's part of the attempt: phase 1, then phase 2 when
// fencing, then the release of whatever it may hold if the attempt failed.
func (a *attempt) work(i int) {
	defer a.d.bg.Done()
	r := a.takeGated(i)
	a.results[i] = r
	a.phase1 <- r
	a.openGate(i, r)
	if a.d.cfg.fencing {
		<-a.decided
		a.phase2 <- a.raise(i, r)
	}
	close(a.nodeDone[i])
	<-a.final
	if a.failed && !r.skipped && (r.granted || r.err != nil) {
		_, _ = a.d.releaseNode(a.ctx, i, a.req.Name, a.req.Token, a.seq)
	}
	a.settled <- struct{}{}
}

// take runs phase 1 on node i.
func (a *attempt) take(i int) p1 {
	ctx, cancel := context.WithTimeout(a.ctx, a.d.cfg.nodeTimeout)
	defer cancel()
	fencing := "0"
	if a.d.cfg.fencing {
		fencing = "1"
	}
	res, err := acquireScript.Run(ctx, a.d.nodes[i].client, a.d.nodes[i].keys(a.req.Name),
		a.req.Token, a.req.TTL.Milliseconds(), a.req.Owner, fencing, a.seq).Slice()
	if err != nil {
		return p1{node: i, err: a.d.diagnose(ctx, a.waiting, i, err)}
	}
	r, err := parseTake(res)
	if err != nil {
		return p1{node: i, err: a.d.nodeErr(i, err)}
	}
	r.node = i
	return r
}

// parseTake reads {1, counter} or {0, fence, owner, pttl}.
func parseTake(res []any) (p1, error) {
	bad := fmt.Errorf("unexpected reply %v to the acquire script", res)
	if len(res) < 2 {
		return p1{}, bad
	}
	code, ok := res[0].(int64)
	fs, _ := res[1].(string)
	fence, err := strconv.ParseUint(fs, 10, 64)
	if err != nil || !ok || code < 0 || code > 1 {
		return p1{}, bad
	}
	if code == 1 {
		return p1{granted: true, value: fence}, nil
	}
	if len(res) < 4 {
		return p1{}, bad
	}
	owner, ok1 := res[2].(string)
	pttl, ok2 := res[3].(int64)
	if !ok1 || !ok2 {
		return p1{}, bad
	}
	ttl := time.Duration(pttl) * time.Millisecond
	if pttl < 0 {
		ttl = -1
	}
	return p1{holder: driver.Holder{Owner: owner, Fence: fence, TTL: ttl}}, nil
}

// raise is node i's phase 2: it reports whether the node is in P.
func (a *attempt) raise(i int, r p1) bool {
	if a.aborted || !r.granted {
		return false
	}
	if r.value == a.fence {
		return true
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.d.cfg.nodeTimeout)
	defer cancel()
	n, err := raiseScript.Run(ctx, a.d.nodes[i].client, a.d.nodes[i].keys(a.req.Name), a.req.Token+"/"+a.seq, a.fence, "fence").Int64()
	return err == nil && n == 1 && r.value < a.fence
}

// settle waits, before a failed attempt returns, until every node has
// answered it and each that granted has been released, so that the
// caller's next call does not find a node held by this attempt: in gate
// mode that call asks one node first, and its own leftover key there
// would refuse it. A node that granted after the decision (the refusals
// were already a majority) is the common case. The wait is bounded by the
// node timeout, and ends with ctx: a node slower than that is released in
// the background.
func (a *attempt) settle(ctx context.Context) {
	t := time.NewTimer(a.d.cfg.nodeTimeout)
	defer t.Stop()
	for range a.d.nodes {
		select {
		case <-a.settled:
		case <-t.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// finish tells the workers the outcome; they release on failure.
func (a *attempt) finish(failed bool) {
	select {
	case <-a.decided:
	default:
		a.aborted = true
		close(a.decided)
	}
	a.failed = failed
	close(a.final)
}

// level waits for every node request of a granted attempt, then raises
// the counters of the nodes it holds to the highest value any of them
// returned (counter only: the fence recorded with the lock stays the
// grant's), so that the next grant needs no phase 2.
func (a *attempt) level() {
	defer a.d.bg.Done()
	var top uint64
	for i, c := range a.nodeDone {
		<-c
		if a.results[i].granted {
			top = max(top, a.results[i].value)
		}
	}
	ctx, cancel := context.WithTimeout(a.ctx, a.d.cfg.nodeTimeout)
	defer cancel()
	for i, r := range a.results {
		if r.granted && r.value < top && top > a.fence {
			_ = raiseScript.Run(ctx, a.d.nodes[i].client, a.d.nodes[i].keys(a.req.Name), a.req.Token+"/"+a.seq, top, "counter").Err()
		}
	}
}
