package redlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// Administration: Inspect, List and ForceRelease, under Redlock's majority
// rule. A lock is held only where a majority of the nodes hold it, so the
// admin calls read every node and report a holder only when a majority of
// them store the same holder: the same token (any attempt of it), fence
// and owner. A key on a minority of the nodes (a failed attempt's
// leftover, or a lease that lost its majority) holds nothing. When too
// many nodes fail to answer for the answers to decide either way, the
// call says so with an error rather than guess.

const (
	// scanCount is the COUNT hint of each SCAN step.
	scanCount = 500
	// readChunk is how many lock keys one read request covers (List).
	readChunk = 100
	// adminNodeTimeout is the least time a force-release gives each node.
	// An acquire must be quick, but a force-release must reach every node
	// it can: a lock left on a node that answered late stays there for the
	// rest of its TTL, and every acquire must then be answered by all the
	// other nodes in time.
	adminNodeTimeout = 2 * time.Second
)

// Inspect implements driver.Lister. It reads name's lock key on every node
// in parallel (each bounded by the node timeout) and reports a holder only
// when a majority of the nodes store the same one: same token, fence and
// owner. Its TTL is the smallest time left among those agreeing nodes, a
// lower bound on when the lock may be free. ok is false when no majority
// agrees and none could (the lock is free, or only on a minority); when
// the nodes that failed to answer could tip the balance either way, the
// result is undecided and Inspect returns an error.
func (d *redlock) Inspect(ctx context.Context, name string) (driver.Holder, bool, error) {
	rs := each(ctx, d, d.cfg.nodeTimeout, 2*d.cfg.nodeTimeout, func(ctx context.Context, i int) ([]vote, error) {
		return d.read(ctx, i, []string{name})
	})
	if err := ctx.Err(); err != nil {
		return driver.Holder{}, false, err
	}
	votes := make([]vote, len(rs))
	for i, r := range rs {
		if r.err != nil {
			votes[i] = vote{err: r.err}
		} else {
			votes[i] = r.val[0]
		}
	}
	return d.majority(name, votes)
}

// List implements driver.Lister. It SCANs every node in parallel for the
// driver's lock keys of names starting with prefix (each SCAN step bounded
// by the node timeout), then reads those keys on every node and returns,
// sorted by name, the locks a majority of the nodes agree on, by the same
// rule as Inspect. It needs a majority of the nodes to answer both steps
// (a lock held by a majority is then seen on at least one of them) and
// fails otherwise. A name the answers cannot decide (held by some nodes,
// too many others failed) is left out, as are locks that end between the
// two steps.
func (d *redlock) List(ctx context.Context, prefix string) ([]driver.Holder, error) {
	names, err := d.listNames(ctx, prefix)
	if err != nil || len(names) == 0 {
		return nil, err
	}
	reads, err := d.readNames(ctx, names)
	if err != nil {
		return nil, err
	}
	return d.agreed(names, reads), nil
}

// listNames is List's first step: it SCANs every node and returns, sorted,
// the names a majority of the nodes may hold. A name a majority holds is
// on at least quorum nodes, of which at most the failed ones went
// unscanned. It fails when fewer than a majority of the nodes answered.
func (d *redlock) listNames(ctx context.Context, prefix string) ([]string, error) {
	pattern := layout.Pattern(prefix)
	scans := each(ctx, d, 0, 0, func(ctx context.Context, i int) ([]string, error) {
		return d.scan(ctx, i, pattern, prefix)
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs := failures(scans)
	if ok, few := d.tooFew(errs); few {
		return nil, fmt.Errorf("redlock: list: %d of %d nodes scanned, %d needed: %w", ok, len(d.nodes), d.quorum, joinNodes(errs))
	}
	seen := map[string]int{}
	for _, s := range scans {
		for _, name := range s.val {
			seen[name]++
		}
	}
	var names []string
	for name, c := range seen {
		if c+len(errs) >= d.quorum {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// readNames is List's second step: it reads the lock keys of names on
// every node, in chunks of readChunk each bounded by the node timeout. It
// fails when fewer than a majority of the nodes answered.
func (d *redlock) readNames(ctx context.Context, names []string) ([]answer[[]vote], error) {
	reads := each(ctx, d, 0, 0, func(ctx context.Context, i int) ([]vote, error) {
		var vs []vote
		for chunk := range slices.Chunk(names, readChunk) {
			c, cancel := context.WithTimeout(ctx, d.cfg.nodeTimeout)
			v, err := d.read(c, i, chunk)
			cancel()
			if err != nil {
				return nil, err
			}
			vs = append(vs, v...)
		}
		return vs, nil
	})
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs := failures(reads)
	if ok, few := d.tooFew(errs); few {
		return nil, fmt.Errorf("redlock: list: %d of %d nodes read, %d needed: %w", ok, len(d.nodes), d.quorum, joinNodes(errs))
	}
	return reads, nil
}

// agreed is List's last step: the holders, in the order of names, that a
// majority of the nodes' reads agree on. Undecided names are left out.
func (d *redlock) agreed(names []string, reads []answer[[]vote]) []driver.Holder {
	var hs []driver.Holder
	votes := make([]vote, len(reads))
	for j, name := range names {
		for i, r := range reads {
			if r.err != nil {
				votes[i] = vote{err: r.err}
			} else {
				votes[i] = r.val[j]
			}
		}
		if h, ok, err := d.majority(name, votes); err == nil && ok {
			hs = append(hs, h)
		}
	}
	return hs
}

// failures returns the errors among the answers.
func failures[T any](as []answer[T]) []error {
	var errs []error
	for _, a := range as {
		if a.err != nil {
			errs = append(errs, a.err)
		}
	}
	return errs
}

// tooFew reports how many nodes answered, given the errors of those that
// failed, and whether they are fewer than a majority.
func (d *redlock) tooFew(errs []error) (answered int, few bool) {
	answered = len(d.nodes) - len(errs)
	return answered, answered < d.quorum
}

// ForceRelease implements driver.ForceReleaser. Step 1 deletes name's lock
// key on every node in parallel, whatever its token, waking the waiters,
// and reads each node's fence counter in the same atomic step. It must
// reach a majority of the nodes: the lock is then free, as no holder can
// keep a majority (the evicted holder's next Refresh fails). The evicted
// holder is the one a majority of the nodes agreed on (the rule of
// Inspect); ok is false when no majority did.
//
// Each node gets at least 2 s (or the node timeout when longer) to
// answer each step, not the acquire's node timeout: a node that answers
// late still has the lock deleted, so a node that is down or cut off
// delays a force-release by up to twice that.
//
// Step 2 (when fencing) writes newFence = 1 + the highest counter step 1
// read to every node, never lowering a counter, and must reach a majority
// too, or ForceRelease fails (the lock stays deleted). Any fence granted
// before was recorded in the counters of a majority, which shares a node
// with step 1's majority: newFence is above it. Any grant after needs a
// majority, which shares a node with step 2's majority, where phase 1
// increments a counter of at least newFence: the next fence is above
// newFence. With fencing off (Config.NoFencing) only step 1 runs and
// newFence is 0.
func (d *redlock) ForceRelease(ctx context.Context, name string) (driver.Holder, bool, uint64, error) {
	votes, top, err := d.forceAll(ctx, name)
	if err != nil {
		return driver.Holder{}, false, 0, err
	}
	h, ok, err := d.majority(name, votes)
	if err != nil {
		h, ok = driver.Holder{}, false
	}
	if !d.cfg.fencing {
		return h, ok, 0, nil
	}
	fence := top + 1
	if err := d.raiseAll(ctx, name, fence); err != nil {
		return driver.Holder{}, false, 0, err
	}
	return h, ok, fence, nil
}

// forceAll is ForceRelease's step 1: it runs the force script on every
// node and returns each node's vote on the deleted lock and the highest
// fence counter read. It fails unless a majority of the nodes answered.
func (d *redlock) forceAll(ctx context.Context, name string) ([]vote, uint64, error) {
	fencing := "0"
	if d.cfg.fencing {
		fencing = "1"
	}
	timeout := max(d.cfg.nodeTimeout, adminNodeTimeout)
	rs := each(ctx, d, timeout, 2*timeout, func(ctx context.Context, i int) (forced, error) {
		res, err := forceScript.Run(ctx, d.nodes[i].client, d.nodes[i].keys(name), layout.Channel(name), fencing).Slice()
		if err != nil {
			return forced{}, err
		}
		return parseForce(res)
	})
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	votes := make([]vote, len(rs))
	var top uint64
	for i, r := range rs {
		votes[i] = vote{err: r.err}
		if r.err == nil {
			votes[i] = r.val.vote
			top = max(top, r.val.counter)
		}
	}
	errs := failures(rs)
	if ok, few := d.tooFew(errs); few {
		return nil, 0, fmt.Errorf("redlock: force-release deleted the lock on %d of %d nodes, %d needed: %w", ok, len(d.nodes), d.quorum, joinNodes(errs))
	}
	return votes, top, nil
}

// raiseAll is ForceRelease's step 2: it raises name's fence counter to at
// least fence on every node and fails unless a majority of them did.
func (d *redlock) raiseAll(ctx context.Context, name string, fence uint64) error {
	timeout := max(d.cfg.nodeTimeout, adminNodeTimeout)
	ws := each(ctx, d, timeout, 2*timeout, func(ctx context.Context, i int) (int64, error) {
		return raiseScript.Run(ctx, d.nodes[i].client, d.nodes[i].keys(name), "", fence, "counter").Int64()
	})
	if err := ctx.Err(); err != nil {
		return err
	}
	errs := failures(ws)
	if ok, few := d.tooFew(errs); few {
		return fmt.Errorf("redlock: force-release deleted the lock but wrote the new fence %d to %d of %d nodes, %d needed: %w", fence, ok, len(d.nodes), d.quorum, joinNodes(errs))
	}
	return nil
}

// forced is one node's answer to the force script: the lock it deleted
// and its fence counter.
type forced struct {
	vote
	counter uint64
}

// parseForce reads the force script's {value, pttl, counter}.
func parseForce(res []any) (forced, error) {
	var out forced
	if len(res) != 3 {
		return out, fmt.Errorf("unexpected reply %v to the force-release script", res)
	}
	raw, _ := res[0].(string)
	pttl, _ := res[1].(int64)
	cs, _ := res[2].(string)
	c, err := strconv.ParseUint(cs, 10, 64)
	if err != nil {
		return out, fmt.Errorf("unexpected fence counter %q in the force-release reply", cs)
	}
	out.vote = vote{present: raw != "", raw: raw, pttl: pttl}
	out.counter = c
	return out, nil
}

// vote is what one node says about one lock.
type vote struct {
	present bool   // the lock key exists
	raw     string // its value, "token/attempt\nfence\nowner"
	pttl    int64  // its PTTL in ms (-1: no expiry)
	err     error  // the node failed to answer
}

// read returns the lock keys of names on node i, each value with its PTTL
// read in the same MULTI/EXEC.
func (d *redlock) read(ctx context.Context, i int, names []string) ([]vote, error) {
	gets := make([]*redis.StringCmd, len(names))
	ttls := make([]*redis.Cmd, len(names))
	_, err := d.nodes[i].client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for j, name := range names {
			gets[j] = p.Get(ctx, layout.Lock(name))
			ttls[j] = p.Do(ctx, "PTTL", layout.Lock(name))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, err
	}
	vs := make([]vote, len(names))
	for j := range names {
		v, err := gets[j].Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, err
		}
		pttl, err := ttls[j].Int64()
		if err != nil {
			return nil, err
		}
		vs[j] = vote{present: true, raw: v, pttl: pttl}
	}
	return vs, nil
}

// scan returns the names of the locks on node i that start with prefix,
// each once.
func (d *redlock) scan(ctx context.Context, i int, pattern, prefix string) ([]string, error) {
	var names []string
	seen := map[string]bool{}
	var cursor uint64
	for {
		c, cancel := context.WithTimeout(ctx, d.cfg.nodeTimeout)
		keys, next, err := d.nodes[i].client.Scan(c, cursor, pattern, scanCount).Result()
		cancel()
		if err != nil {
			return nil, err
		}
		for _, k := range keys {
			if name, ok := layout.Name(k); ok && strings.HasPrefix(name, prefix) && !seen[name] {
				seen[name] = true
				names = append(names, name)
			}
		}
		if next == 0 {
			return names, nil
		}
		cursor = next
	}
}

// majority applies the majority rule to the nodes' votes on name: the
// holder a majority of the nodes store (same token, any attempt of it,
// same fence and owner), with the smallest TTL among them; ok false when
// no holder has a majority and none could have one; an error when the
// nodes that failed could tip the balance, or when the majority's value is
// not in the driver's format.
func (d *redlock) majority(name string, votes []vote) (driver.Holder, bool, error) {
	n, q := len(d.nodes), d.quorum
	best, errs := largestGroup(name, votes)
	agree := 0
	if best != nil {
		agree = best.count
	}
	switch {
	case agree >= q && best.err != nil:
		return driver.Holder{}, false, fmt.Errorf("redlock: lock %q: %w", name, best.err)
	case agree >= q:
		return best.h, true, nil
	case agree+len(errs) >= q:
		return driver.Holder{}, false, fmt.Errorf("redlock: lock %q: %d of %d nodes agree on a holder and %d failed to answer, %d needed to tell whether it is held: %w",
			name, agree, n, len(errs), q, joinNodes(errs))
	}
	return driver.Holder{}, false, nil
}

// group is the nodes that store one holder of a lock.
type group struct {
	h     driver.Holder // TTL: the smallest among the nodes, -1 if none expires
	count int
	err   error // the value is not in the driver's format
}

// largestGroup groups the present votes by holder and returns the group
// with the most nodes (nil when no node holds the lock; the first to reach
// its count on a tie) and the errors of the nodes that failed.
func largestGroup(name string, votes []vote) (*group, []error) {
	groups := map[string]*group{}
	var best *group
	var errs []error
	for _, v := range votes {
		if v.err != nil {
			errs = append(errs, v.err)
			continue
		}
		if !v.present {
			continue
		}
		key, val, perr := holderKey(v.raw)
		g := groups[key]
		if g == nil {
			g = &group{h: driver.Holder{Name: name, Owner: val.Owner, Fence: val.Fence, TTL: -1}, err: perr}
			groups[key] = g
		}
		g.add(v.pttl)
		if best == nil || g.count > best.count {
			best = g
		}
	}
	return best, errs
}

// holderKey parses a lock value and returns the key its holder is grouped
// by: the value without the token's attempt number. An unparsable value
// agrees only with itself.
func holderKey(raw string) (string, rediscore.Value, error) {
	val, err := rediscore.ParseValue(raw)
	if err != nil {
		return "\x00" + raw, val, err
	}
	val.Token, _, _ = strings.Cut(val.Token, "/")
	return val.String(), val, nil
}

// add counts one more node storing g's holder, with its PTTL in ms.
func (g *group) add(pttl int64) {
	g.count++
	if pttl < 0 {
		return
	}
	ttl := time.Duration(pttl) * time.Millisecond
	if g.h.TTL < 0 || ttl < g.h.TTL {
		g.h.TTL = ttl
	}
}

// answer is one node's reply to a request of each.
type answer[T any] struct {
	val T
	err error
}

// indexed is an answer with the index of the node it came from.
type indexed[T any] struct {
	i int
	a answer[T]
}

// each runs op on every node in parallel and returns the answers by node.
// When timeout is positive, each call gets a context bounded by it; when
// wait is positive, each returns after at most wait (twice the node
// timeout, as ask does, so that a busy scheduler starting the requests
// late does not fail them), the nodes still unheard from reporting
// errNodeTimeout and finishing in the background. It also returns when ctx
// is done; the caller then returns ctx's error.
func each[T any](ctx context.Context, d *redlock, timeout, wait time.Duration, op func(ctx context.Context, i int) (T, error)) []answer[T] {
	ch := spread(ctx, false, d, timeout, op)
	out := make([]answer[T], len(d.nodes))
	for i := range out {
		out[i].err = d.nodeErr(i, errNodeTimeout)
	}
	var expired <-chan time.Time
	if wait > 0 {
		timer := time.NewTimer(wait)
		defer timer.Stop()
		expired = timer.C
	}
	for range out {
		select {
		case r := <-ch:
			out[r.i] = r.a
		case <-expired:
			return out
		case <-ctx.Done():
			return out
		}
	}
	return out
}

// spread starts op on every node, each in a goroutine of its own counted
// in d.bg, and returns the channel (buffered for every node) on which the
// answers arrive as they come, errors named by node and diagnosed
// (diagnose) while ctx is not done. Each call gets a context derived from
// ctx, bounded by timeout when positive; detach keeps ctx's values but not
// its cancellation.
func spread[T any](ctx context.Context, detach bool, d *redlock, timeout time.Duration, op func(ctx context.Context, i int) (T, error)) <-chan indexed[T] {
	rctx := ctx
	if detach {
		rctx = context.WithoutCancel(ctx)
	}
	n := len(d.nodes)
	ch := make(chan indexed[T], n)
	d.bg.Add(n)
	for i := range n {
		go func() {
			defer d.bg.Done()
			c, cancel := rctx, context.CancelFunc(func() {})
			if timeout > 0 {
				c, cancel = context.WithTimeout(rctx, timeout)
			}
			defer cancel()
			v, err := op(c, i)
			if err != nil {
				err = d.diagnose(c, ctx.Done(), i, err)
			}
			ch <- indexed[T]{i, answer[T]{v, err}}
		}()
	}
	return ch
}

var _ interface {
	driver.Lister
	driver.ForceReleaser
} = (*redlock)(nil)
