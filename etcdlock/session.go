package etcdlock

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A session is one etcd lease shared by every key that one driver holds
// with one TTL (locks, and queued waiters on the shortest TTL: the wait
// lease, see waitlease.go), like concurrency.Session: an acquire
// costs one write (the key), not three (grant, key, revoke). It is granted
// lazily, renewed by the watchdog's refreshes (one KeepAliveOnce per
// session per batch) and by the acquire path when it is getting old, and
// revoked when it has been idle for a while or the driver closes.
//
// A key under a shared lease would live as long as any sibling keeps the
// lease alive, so the driver keeps each key's own TTL itself: every key
// records when its holder last asked for it (grant, refresh, a waiter's
// renewal), and each renewal of the lease first deletes the keys nobody
// asked for within a TTL (a lease declared lost, a holder without
// auto-refresh, a release that failed). A key therefore ends at most a
// third of a TTL after its own TTL, and a lost lease ends every key under
// it (Refresh then says driver.ErrSessionEnded).
type session struct {
	id   clientv3.LeaseID
	secs int64
	ttl  time.Duration

	// Guarded by pool.mu.
	since    time.Time            // SENT time of the last successful grant or renewal
	dead     bool                 // etcd said it is gone, or it was revoked
	retired  bool                 // no new keys go under it
	keys     map[string]time.Time // key → when its holder last asked for it; zero: delete it (mark, unmark)
	nlive    int                  // keys with a time: live() without a walk over keys
	handed   map[string]bool      // keys of its slots that another driver took over (Adopt): never reused
	renewing chan struct{}        // closed when the renewal in flight ends
	idle     time.Time            // when its last live key went
	timer    *time.Timer          // idle check
}

// pool holds a driver's sessions.
type pool struct {
	cli *clientv3.Client

	mu      sync.Mutex
	closed  bool
	current map[int64]*session // by lease seconds: where new keys go
	all     map[clientv3.LeaseID]*session
	byKey   map[string]*session
	// moving holds, for a key on its way to another session (a waiter's
	// key claimed under the lock's lease, see rebind), that session: until
	// the move is settled the key may live under either lease, so it is
	// bound to both.
	moving   map[string]*session
	byToken  map[string]string // claim (name and token) → its key
	held     map[string]bool   // keys granted (not waiting): see close
	claimOf  map[string]string // key → its claim
	granting map[int64]*grantFlight
	// deleting holds, for each key whose background deletion is on its
	// way (deleteLater), a channel closed when it has finished: a retry
	// by the same claim waits for it rather than put the key again and
	// have the late delete remove it under a grant.
	deleting map[string]chan struct{}
	hook     func(step string) // tests: called with "delete" before a background delete

	ctx    context.Context // background work; canceled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type grantFlight struct {
	done chan struct{}
	err  error
}

// Thresholds, as divisors of the TTL: a session renewed longer than
// TTL/renewAgeDiv ago is renewed on the acquire path before use (so that
// a new grant's TTL counts from at most TTL/12 before it was asked for;
// see Grant.Since), and an idle one is revoked after TTL/idleLingerDiv.
const (
	renewAgeDiv   = 12
	idleLingerDiv = 3
)

// errClosed is returned by calls after Close.
var errClosed = errors.New("etcd driver is closed")

// errSessionGone is a session etcd no longer has.
var errSessionGone = errors.New("etcd lease gone")

func newPool(cli *clientv3.Client) *pool {
	ctx, cancel := context.WithCancel(context.Background())
	return &pool{
		cli: cli, ctx: ctx, cancel: cancel,
		current: map[int64]*session{}, all: map[clientv3.LeaseID]*session{},
		byKey: map[string]*session{}, moving: map[string]*session{}, granting: map[int64]*grantFlight{},
		byToken: map[string]string{}, claimOf: map[string]string{}, held: map[string]bool{},
		deleting: map[string]chan struct{}{},
	}
}

// get returns the key for claim (a name and token; see claimOf) in dir
// and the session it goes under, granting or renewing the session as
// needed, and registers the key (asked for now). A claim keeps its key
// while it lives, so a retry of an attempt whose reply was lost puts the
// same key. since is when the session's TTL started counting.
func (p *pool) get(ctx context.Context, secs int64, claim, dir string) (string, *session, time.Time, error) {
	return p.take(ctx, secs, binding{claim: claim, dir: dir})
}

// binding says which key pick binds to the session it returns: claim's
// key in dir (registered as get does), or key, already registered, bound
// anew (rebind): to wait under it, or to be granted under it; or, with
// both claim and key, key registered as claim's (Adopt: another driver's
// key, whose name is in that driver's slots).
type binding struct {
	claim, dir string
	key        string
	wait       bool
}

// take waits for pick to return a usable session for secs, with b's key
// bound to it; since is when the session's TTL started counting.
func (p *pool) take(ctx context.Context, secs int64, b binding) (string, *session, time.Time, error) {
	for {
		key, s, wait, err := p.pick(ctx, secs, b)
		if s != nil || err != nil {
			return key, s, p.sinceOf(s), err
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return "", nil, time.Time{}, ctx.Err()
		}
	}
}

// pick returns a usable session and b's key bound to it, or a channel to
// wait on before trying again. When the session needs a renewal and nobody
// is renewing it, pick renews it itself. The key is bound under p.mu as
// the session is chosen, so that an idle session is never revoked between
// the choice and the write that puts the key under it.
func (p *pool) pick(ctx context.Context, secs int64, b binding) (string, *session, <-chan struct{}, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return "", nil, nil, errClosed
	}
	s := p.current[secs]
	if key, ok := p.byToken[b.claim]; ok && b.claim != "" {
		if ch := p.deleting[key]; ch != nil { // an earlier attempt's key is being deleted
			p.mu.Unlock()
			return "", nil, ch, nil
		}
		switch old := p.byKey[key]; {
		case old == nil || old.dead:
			p.drop(key)
		case old.secs == secs:
			s = old // an earlier attempt's key may exist: keep it
		}
		// Otherwise it is a waiter's key on the wait lease: register binds
		// it to s, under which the attempt puts it.
	}
	if s == nil {
		defer p.mu.Unlock()
		return "", nil, p.startGrant(secs), nil
	}
	switch {
	case s.fresh(), b.wait && s.young():
		key := p.bind(s, b)
		p.mu.Unlock()
		return key, s, nil, nil
	case s.renewing != nil:
		ch := s.renewing
		p.mu.Unlock()
		return "", nil, ch, nil
	}
	p.mu.Unlock()
	err := p.renew(ctx, s, nil)
	if err != nil && !errors.Is(err, errSessionGone) {
		return "", nil, nil, err
	}
	return "", nil, closedChan, nil // look again: renewed, or gone and replaced
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// fresh reports whether s can take a key without a renewal first: renewed
// less than TTL/renewAgeDiv ago, or a renewal is on its way and it was
// renewed less than a third of a TTL ago. A grant's TTL then counts from
// s.since. p.mu is held.
func (s *session) fresh() bool {
	age := time.Since(s.since)
	return age < s.ttl/renewAgeDiv || s.renewing != nil && age < s.ttl/3
}

// bind binds b's key to s and returns it. p.mu is held.
func (p *pool) bind(s *session, b binding) string {
	switch {
	case b.claim != "" && b.key != "":
		return p.adoptKey(s, b.claim, b.key)
	case b.claim != "":
		return p.register(s, b.claim, b.dir)
	}
	p.rebound(b.key, s, !b.wait)
	return b.key
}

// register returns claim's key under s, asked for now: the key it has
// (bound to s if it was bound elsewhere), or the first free slot of this
// session in dir. p.mu is held.
//
// Keys are DIR/LEASE-SLOT, as concurrency.Mutex's are DIR/LEASE: a name's
// keys are reused from one grant to the next instead of a new key per
// token, because etcd keeps every key ever deleted in its index until a
// compaction, and the range reads of a lock's directory would otherwise
// slow down with every grant. A slot is this driver's alone (its lease ID
// is in the key) and belongs to one claim until that claim is done, so a
// key that exists under a claim's slot is that claim's. A key keeps its
// name when it moves to another lease (rebind): a slot is free only when
// no session of the driver has it, and never again once another driver
// has taken the key over (handOver).
func (p *pool) register(s *session, claim, dir string) string {
	key, ok := p.byToken[claim]
	if !ok {
		for i := 0; ; i++ {
			key = dir + strconv.FormatInt(int64(s.id), 16) + "-" + strconv.Itoa(i)
			if _, used := s.keys[key]; !used && p.byKey[key] == nil && !s.handed[key] {
				break
			}
		}
		p.byToken[claim], p.claimOf[key], p.byKey[key] = key, claim, s
	} else if p.byKey[key] != s {
		p.rebound(key, s, false)
	}
	s.mark(key, time.Now())
	return key
}

// keyOf returns claim's key, if it has one.
func (p *pool) keyOf(claim string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key, ok := p.byToken[claim]
	return key, ok
}

func (p *pool) sinceOf(s *session) time.Time {
	if s == nil {
		return time.Time{}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return s.since
}

// startGrant starts granting a session for secs unless a grant is on its
// way, and returns the channel closed when it ends. p.mu is held. The
// grant runs detached from the caller, so that callers that give up do not
// leave a half-granted lease: a lease nobody took is revoked when idle.
func (p *pool) startGrant(secs int64) <-chan struct{} {
	if f := p.granting[secs]; f != nil {
		return f.done
	}
	f := &grantFlight{done: make(chan struct{})}
	p.granting[secs] = f
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f.err = p.grant(secs)
		p.mu.Lock()
		delete(p.granting, secs)
		p.mu.Unlock()
		close(f.done)
	}()
	return f.done
}

// grantTimeout bounds a lease grant that runs detached from its callers.
const grantTimeout = 5 * time.Second

func (p *pool) grant(secs int64) error {
	ctx, cancel := context.WithTimeout(p.ctx, grantTimeout)
	defer cancel()
	sent := time.Now()
	resp, err := p.cli.Grant(ctx, secs)
	if err != nil {
		return err
	}
	s := &session{id: resp.ID, secs: resp.TTL, ttl: time.Duration(resp.TTL) * time.Second, since: sent,
		keys: map[string]time.Time{}, handed: map[string]bool{}}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		p.background(func(ctx context.Context) { _, _ = p.cli.Revoke(ctx, resp.ID) })
		return errClosed
	}
	if old := p.current[secs]; old != nil {
		p.retire(old)
	}
	p.current[secs], p.all[s.id] = s, s
	p.idleCheck(s)
	return nil
}

// renew deletes the keys under s that nobody asked for within a TTL,
// then renews s once. touch are keys asked for now (a refresh, a waiter's
// renewal). It returns errSessionGone when etcd no longer has s.
func (p *pool) renew(ctx context.Context, s *session, touch []string) error {
	sent := time.Now()
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return errClosed // a closed driver keeps no lease alive
	}
	for _, k := range touch {
		if _, ok := s.keys[k]; ok {
			s.mark(k, sent)
		}
	}
	stale := s.staleKeys(sent)
	mine := s.renewing == nil
	if mine {
		s.renewing = make(chan struct{})
	}
	p.mu.Unlock()
	if mine {
		defer p.renewed(s)
	}
	if err := p.sweep(ctx, s, stale); err != nil {
		return err
	}
	ka, err := p.cli.KeepAliveOnce(ctx, s.id)
	if errors.Is(err, rpctypes.ErrLeaseNotFound) || err == nil && ka.TTL <= 0 {
		p.gone(s)
		return errSessionGone
	}
	if err != nil {
		return err
	}
	p.mu.Lock()
	if sent.After(s.since) {
		s.since = sent
	}
	p.mu.Unlock()
	return nil
}

func (p *pool) renewed(s *session) {
	p.mu.Lock()
	close(s.renewing)
	s.renewing = nil
	p.mu.Unlock()
}

// staleKeys lists the keys nobody asked for within a TTL of now. p.mu is
// held.
func (s *session) staleKeys(now time.Time) []string {
	var stale []string
	for k, at := range s.keys {
		if now.Sub(at) >= s.ttl {
			stale = append(stale, k)
		}
	}
	return stale
}

// maxTxnOps is etcd's default --max-txn-ops: the most operations one
// transaction may carry.
const maxTxnOps = 128

// forget drops keys that are known to be gone.
func (p *pool) forget(keys []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range keys {
		p.drop(k)
	}
}

// drop removes key, known to be gone, from its session (and from the
// session it was moving to). p.mu is held.
func (p *pool) drop(key string) *session {
	s, to := p.byKey[key], p.moving[key]
	p.unlink(key)
	if to != nil {
		to.unmark(key)
		p.idleCheck(to)
	}
	if s == nil {
		return nil
	}
	s.unmark(key)
	p.idleCheck(s)
	return s
}

// unlink forgets key's claim and sessions. p.mu is held.
func (p *pool) unlink(key string) {
	delete(p.byToken, p.claimOf[key])
	delete(p.claimOf, key)
	delete(p.byKey, key)
	delete(p.moving, key)
	delete(p.held, key)
}

// done records that claim's key is gone (released, or found missing) and
// says whether the session it lived under has ended. A key that is no
// longer claim's is left alone: another call for claim dropped it, and
// its slot may be another claim's key by now (a refresh that read the
// key gone just before the release's own done, say).
func (p *pool) done(claim, key string) (sessionEnded bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.claimOf[key]; !ok || c != claim {
		return false
	}
	s := p.drop(key)
	return s != nil && s.dead
}

// abandon marks key, whose holder gave up on it but whose deletion failed,
// for deletion at the next renewal of the session it is bound to (of
// either, during a move); unrenewed, the lease expires with it.
func (p *pool) abandon(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range []*session{p.byKey[key], p.moving[key]} {
		if s != nil {
			s.mark(key, time.Time{})
			p.idleCheck(s)
		}
	}
}

// touch records that keys are asked for now and returns the lease each
// lives under as far as the driver knows (0: unknown).
func (p *pool) touch(keys []string) []clientv3.LeaseID {
	now := time.Now()
	ids := make([]clientv3.LeaseID, len(keys))
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, k := range keys {
		if s := p.byKey[k]; s != nil {
			s.mark(k, now)
			ids[i] = s.id
		}
	}
	return ids
}

// sessionOf returns the session key lives under, if known.
func (p *pool) sessionOf(key string) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byKey[key]
}

// byID returns the live session with id, if any.
func (p *pool) byID(id clientv3.LeaseID) *session {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all[id]
}

// gone records that etcd no longer has s: every key under it is gone.
func (p *pool) gone(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.dead = true
	p.retire(s)
	delete(p.all, s.id)
}

// retire stops new keys from going under s. p.mu is held.
func (p *pool) retire(s *session) {
	s.retired = true
	if p.current[s.secs] == s {
		delete(p.current, s.secs)
	}
	p.idleCheck(s)
}

// live counts the keys under s that someone still holds. p.mu is held.
// It is kept as keys change: idleCheck runs at every key's end, and a
// walk over 100,000 keys each time made releasing them all quadratic
// (minutes at 100,000).
func (s *session) live() int { return s.nlive }

// mark records when key's holder last asked for it (the zero time: it is
// to be deleted). p.mu is held.
func (s *session) mark(key string, at time.Time) {
	if old, ok := s.keys[key]; ok && !old.IsZero() {
		s.nlive--
	}
	if !at.IsZero() {
		s.nlive++
	}
	s.keys[key] = at
}

// unmark removes key from s. p.mu is held.
func (s *session) unmark(key string) {
	if at, ok := s.keys[key]; ok {
		if !at.IsZero() {
			s.nlive--
		}
		delete(s.keys, key)
	}
}

// idleCheck arms the idle timer of s when no live key is left. p.mu is
// held. A retired session is revoked as soon as it is idle; a current one
// after lingering a third of its TTL, for the next acquire to reuse.
func (p *pool) idleCheck(s *session) {
	if s.dead || p.closed || s.live() > 0 {
		return
	}
	s.idle = time.Now()
	linger := s.ttl / idleLingerDiv
	if s.retired {
		linger = 0
	}
	if s.timer != nil {
		if !s.retired {
			return
		}
		s.timer.Stop() // lingering no more: fire now (a run already under way sees the session dead)
	}
	s.timer = time.AfterFunc(linger, func() { p.idleFired(s) })
}

// idleFired revokes s if it is still idle (and forgets it), else waits.
func (p *pool) idleFired(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.timer = nil
	if s.dead || p.closed || s.live() > 0 {
		return
	}
	linger := s.ttl / idleLingerDiv
	if left := linger - time.Since(s.idle); left > 0 && !s.retired {
		s.timer = time.AfterFunc(left, func() { p.idleFired(s) })
		return
	}
	s.dead = true
	p.retire(s)
	delete(p.all, s.id)
	for k := range s.keys {
		p.unbind(k, s)
	}
	p.background(func(ctx context.Context) { _, _ = p.cli.Revoke(ctx, s.id) })
}

// background runs fn detached, bounded by cleanupTimeout and by close.
// p.mu is held.
func (p *pool) background(fn func(ctx context.Context)) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		ctx, cancel := context.WithTimeout(p.ctx, cleanupTimeout)
		defer cancel()
		fn(ctx)
	}()
}

// deleteLater deletes key in the background: the caller gave up on it and
// must not wait (its context is done). If that fails too, the key is
// deleted at the session's next renewal, or expires with the lease. Until
// the delete has finished, a new attempt by the same claim waits in pick:
// it would put the same key, and the late delete would remove the key of
// a lock just granted (a swept waiter retried by the portable layer).
func (p *pool) deleteLater(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed || p.byKey[key] == nil {
		return // not the driver's key (any more): its slot may be another's
	}
	if p.deleting[key] != nil {
		return // already on its way
	}
	claim := p.claimOf[key]
	deleted := make(chan struct{})
	p.deleting[key] = deleted
	p.background(func(ctx context.Context) {
		if p.hook != nil {
			p.hook("delete")
		}
		if _, err := p.cli.Delete(ctx, key); err != nil {
			p.abandon(key)
		} else {
			p.done(claim, key)
		}
		p.mu.Lock()
		delete(p.deleting, key)
		p.mu.Unlock()
		close(deleted)
	})
}

// unsure handles key when its caller gave up before etcd answered the
// put: the put may still land, even after any delete sent now (a stalled
// server applies what it queued in no set order). The key is deleted now
// in the background and again at the session's renewals, its slot is
// never handed out again, and its session takes no new keys and is
// revoked as soon as no live key is left under it: a put that landed is
// deleted with the lease, and one that lands later fails (its lease is
// gone). So the late put leaves nothing once the locks already under that
// session end; a session that stays in use meanwhile keeps such a key at
// most until its next renewal deletes it.
func (p *pool) unsure(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	s := p.byKey[key]
	if s == nil {
		return
	}
	delete(p.byToken, p.claimOf[key])
	delete(p.claimOf, key)
	for _, s := range []*session{s, p.moving[key]} { // the put may land under either
		if s != nil {
			s.mark(key, time.Time{}) // not live; deleted at each renewal until the revoke
			p.retire(s)
		}
	}
	p.background(func(ctx context.Context) { _, _ = p.cli.Delete(ctx, key) })
}

// close stops the background work and revokes every session that holds
// no lock (which deletes every key still under it), bounded by
// cleanupTimeout. A session under which a lock is still held — one its
// Locker detached (Lease.Detach: handed on, to be resumed elsewhere) — is
// left to run out on its own, unrenewed: the lock stays held until its
// TTL runs out, as on every backend; the session's other keys (waiters',
// abandoned ones) are deleted while they are still under it.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	var revoke []clientv3.LeaseID
	var sweep []clientv3.Op
	for id, s := range p.all {
		if s.timer != nil {
			s.timer.Stop()
		}
		s.dead = true
		if !p.holds(s) {
			revoke = append(revoke, id)
			continue
		}
		for k, at := range s.keys {
			if at.IsZero() || !p.held[k] {
				sweep = append(sweep, deleteUnder(k, id, true))
			}
		}
	}
	p.mu.Unlock()
	p.cancel() // grants in flight and idle revocations: the revokes below cover them
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, id := range revoke {
		wg.Go(func() { _, _ = p.cli.Revoke(ctx, id) })
	}
	for len(sweep) > 0 {
		ops := sweep[:min(len(sweep), sweepOps)]
		sweep = sweep[len(ops):]
		wg.Go(func() { _, _ = p.cli.Txn(ctx).Then(ops...).Commit() })
	}
	wg.Wait()
	p.wg.Wait()
}

// holds reports whether a lock granted under s is still held there: not
// released, not given up on, asked for within a TTL. p.mu is held.
func (p *pool) holds(s *session) bool {
	for k, at := range s.keys {
		if !at.IsZero() && time.Since(at) < s.ttl && p.held[k] && p.byKey[k] == s {
			return true
		}
	}
	return false
}

// markHeld records that key was granted.
func (p *pool) markHeld(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.claimOf[key] != "" {
		p.held[key] = true
	}
}
