package rediscore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// subCmdTimeout bounds one SUBSCRIBE or UNSUBSCRIBE.
const subCmdTimeout = 5 * time.Second

// ErrClosed is the error of a Watch on a closed Mux.
var ErrClosed = errors.New("driver is closed")

// Mux multiplexes the waiters of one client over ONE pub/sub connection,
// opened on the first Watch: a channel is subscribed while at least one
// waiter watches it, and each message wakes the waiters it concerns
// (NewWaiter, NewListener).
//
// SUBSCRIBE and UNSUBSCRIBE go out in order from one goroutine, so a quick
// unsubscribe/subscribe pair cannot be reordered, and a slow server holds
// up no Watch, Unwatch or message. Redis confirms them in the order sent,
// so each channel keeps a FIFO of awaited confirmations of each. After a
// reconnect, go-redis subscribes every channel again: a confirmation
// counts for an awaited one (the channel is subscribed on the live
// connection), and one that nobody awaited wakes the channel's waiters,
// since a release may have been missed meanwhile.
type Mux struct {
	client redis.UniversalClient
	fresh  func(channel, payload string) bool

	mu     sync.Mutex
	ps     *redis.PubSub // nil until the first Watch
	chans  map[string]*watched
	expect map[string][]*Confirm      // SUBSCRIBE confirmations awaited, in the order sent
	leave  map[string][]chan struct{} // UNSUBSCRIBE confirmations awaited, in the order sent
	queue  []subCmd
	closed bool

	kick chan struct{}
	stop chan struct{}
	wg   sync.WaitGroup
}

// watched is one channel's waiters, oldest first, and the confirmation of
// the SUBSCRIBE they rely on.
type watched struct {
	waiters []*Waiter
	confirm *Confirm
}

// subCmd is a SUBSCRIBE (with its confirmation) or an UNSUBSCRIBE (with a
// channel closed once it is confirmed).
type subCmd struct {
	channel string
	confirm *Confirm
	left    chan struct{}
}

// NewMux returns a Mux on client. Before a message wakes anyone, fresh
// (when not nil) may drop it by returning false, e.g. a copy of a message
// that another connection delivered already.
func NewMux(client redis.UniversalClient, fresh func(channel, payload string) bool) *Mux {
	return &Mux{
		client: client, fresh: fresh,
		chans: map[string]*watched{}, expect: map[string][]*Confirm{}, leave: map[string][]chan struct{}{},
		kick: make(chan struct{}, 1), stop: make(chan struct{}),
	}
}

// Watch adds w to channel's waiters, subscribing when it is the first (or
// when the channel's last SUBSCRIBE failed), and returns the confirmation
// of the subscription w relies on. It does not wait for it (Subscribe
// does).
func (m *Mux) Watch(channel string, w *Waiter) (*Confirm, error) {
	return m.watch(channel, w, false)
}

// Listen is Watch for a waiter that watches channel for the Mux's life
// and is never unwatched (a Locker's inbox): w is added once, and a
// Listen after the channel's SUBSCRIBE failed subscribes again.
func (m *Mux) Listen(channel string, w *Waiter) (*Confirm, error) {
	return m.watch(channel, w, true)
}

func (m *Mux) watch(channel string, w *Waiter, once bool) (*Confirm, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	m.start()
	ch := m.chans[channel]
	if ch == nil {
		ch = &watched{}
		m.chans[channel] = ch
	}
	if ch.confirm == nil || ch.confirm.failed {
		ch.confirm = newConfirm()
		m.expect[channel] = append(m.expect[channel], ch.confirm)
		m.enqueue(subCmd{channel: channel, confirm: ch.confirm})
	}
	if !once || !slices.Contains(ch.waiters, w) {
		ch.waiters = append(ch.waiters, w)
	}
	return ch.confirm, nil
}

// Unwatch removes w from channel's waiters, unsubscribing when it was the
// last. The channel it returns is closed once Redis confirmed that
// UNSUBSCRIBE: from then on it sends no more of the channel's messages to
// this connection. It is closed at once when no UNSUBSCRIBE is needed,
// and as soon as it fails or the Mux is closed.
func (m *Mux) Unwatch(channel string, w *Waiter) <-chan struct{} {
	return m.unwatch(channel, w, true)
}

// unwatch is Unwatch; untracked, the UNSUBSCRIBE's confirmation is not
// awaited, and the channel returned is closed at once. Only a channel
// whose every UNSUBSCRIBE is untracked (a waiter's own) may go untracked:
// a tracked one would take the other's confirmation for its own.
func (m *Mux) unwatch(channel string, w *Waiter, tracked bool) <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	ch := m.chans[channel]
	if ch == nil {
		return closedChan
	}
	ch.waiters = slices.DeleteFunc(ch.waiters, func(x *Waiter) bool { return x == w })
	if len(ch.waiters) > 0 || m.closed {
		return closedChan
	}
	delete(m.chans, channel)
	if !tracked {
		m.enqueue(subCmd{channel: channel})
		return closedChan
	}
	left := make(chan struct{})
	m.leave[channel] = append(m.leave[channel], left)
	m.enqueue(subCmd{channel: channel, left: left})
	return left
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Subscribe is Watch, then waits for the subscription's confirmation or
// for ctx. stop is Unwatch, waiting (at most 5 s) for the confirmation of
// its UNSUBSCRIBE; it is safe to call more than once.
func (m *Mux) Subscribe(ctx context.Context, channel string, w *Waiter) (stop func(), err error) {
	return m.subscribe(ctx, channel, w, true)
}

// SubscribeOwn is Subscribe for a channel of w's own (a queued waiter's,
// named for its token), that no other waiter watches and only w's owner
// may watch again: stop queues the UNSUBSCRIBE and returns at once,
// without waiting for its confirmation. A message that comes after stop
// reaches nobody, or the channel's next waiter if it is watched again
// meanwhile (the UNSUBSCRIBE and the SUBSCRIBE go out in that order).
// Waiting would hold a waiter that was just granted for a round trip on
// the pub/sub connection before it can go ahead.
func (m *Mux) SubscribeOwn(ctx context.Context, channel string, w *Waiter) (stop func(), err error) {
	return m.subscribe(ctx, channel, w, false)
}

func (m *Mux) subscribe(ctx context.Context, channel string, w *Waiter, await bool) (stop func(), err error) {
	conf, err := m.Watch(channel, w)
	if err != nil {
		return nil, err
	}
	stop = sync.OnceFunc(func() {
		if await {
			m.awaitLeft(channel, m.Unwatch(channel, w))
		} else {
			m.unwatch(channel, w, false)
		}
	})
	select {
	case <-conf.Done():
		err = conf.Err()
	case <-ctx.Done():
		err = ctx.Err()
	}
	if err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// Waiters lists channel's waiters, oldest first.
func (m *Mux) Waiters(channel string) []*Waiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ch := m.chans[channel]; ch != nil {
		return slices.Clone(ch.waiters)
	}
	return nil
}

// start opens the connection and its two goroutines on first use. m.mu is
// held.
func (m *Mux) start() {
	if m.ps != nil {
		return
	}
	m.ps = m.client.Subscribe(context.Background())
	msgs := m.ps.ChannelWithSubscriptions(redis.WithChannelSize(256))
	m.wg.Add(2)
	go m.send()
	go m.read(msgs)
}

// enqueue hands c to the sending goroutine. m.mu is held.
func (m *Mux) enqueue(c subCmd) {
	m.queue = append(m.queue, c)
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// send issues the queued commands in order until the Mux is closed.
func (m *Mux) send() {
	defer m.wg.Done()
	for {
		select {
		case <-m.kick:
		case <-m.stop:
			m.drop()
			return
		}
		for c, ok := m.pop(); ok; c, ok = m.pop() {
			m.exec(c)
		}
	}
}

func (m *Mux) pop() (subCmd, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.queue) == 0 {
		return subCmd{}, false
	}
	c := m.queue[0]
	m.queue = m.queue[1:]
	return c, true
}

// drop gives up the commands still queued once the Mux is closed (Close
// settled their confirmations).
func (m *Mux) drop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.queue = nil
}

func (m *Mux) exec(c subCmd) {
	ctx, cancel := context.WithTimeout(context.Background(), subCmdTimeout)
	defer cancel()
	if c.confirm == nil {
		if err := m.ps.Unsubscribe(ctx, c.channel); err != nil {
			m.settle(c.channel, c.left)
		}
		return
	}
	if err := m.ps.Subscribe(ctx, c.channel); err != nil {
		m.fail(c.channel, c.confirm, err)
	}
}

// awaitLeft waits for left, the confirmation of an UNSUBSCRIBE, at most
// subCmdTimeout: a reply lost with a connection that go-redis replaced
// never comes, and waiting for it is then given up (and the FIFO rid of
// it, so that it does not take the next UNSUBSCRIBE's reply).
func (m *Mux) awaitLeft(channel string, left <-chan struct{}) {
	t := time.NewTimer(subCmdTimeout)
	defer t.Stop()
	select {
	case <-left:
	case <-t.C:
		m.mu.Lock()
		defer m.mu.Unlock()
		if i := slices.IndexFunc(m.leave[channel], func(c chan struct{}) bool { return c == left }); i >= 0 {
			removeAt(m.leave, channel, i)
		}
	}
}

// settle closes left, an awaited UNSUBSCRIBE confirmation, unless it is
// closed already: its UNSUBSCRIBE failed.
func (m *Mux) settle(channel string, left chan struct{}) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i := slices.Index(m.leave[channel], left); i >= 0 {
		removeAt(m.leave, channel, i)
		close(left)
	}
}

// removeAt removes the element i of fifos[key], and the key once its FIFO
// is empty: the maps hold only the channels with confirmations awaited.
func removeAt[T any](fifos map[string][]T, key string, i int) {
	if q := slices.Delete(fifos[key], i, i+1); len(q) > 0 {
		fifos[key] = q
	} else {
		delete(fifos, key)
	}
}

// fail drops an awaited confirmation that will not come (its SUBSCRIBE
// failed), failing it: its waiters learn at once, and the channel's next
// Watch subscribes again.
func (m *Mux) fail(channel string, conf *Confirm, err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	i := slices.Index(m.expect[channel], conf)
	if i < 0 {
		return // confirmed meanwhile, or failed by Close
	}
	removeAt(m.expect, channel, i)
	conf.fail(err)
}

// read routes confirmations and messages until the connection is closed.
func (m *Mux) read(msgs <-chan any) {
	defer m.wg.Done()
	for msg := range msgs {
		switch msg := msg.(type) {
		case *redis.Subscription:
			switch msg.Kind {
			case "subscribe":
				m.confirmed(msg.Channel)
			case "unsubscribe":
				m.left(msg.Channel)
			}
		case *redis.Message:
			if m.fresh == nil || m.fresh(msg.Channel, msg.Payload) {
				m.mu.Lock()
				m.wake(msg.Channel, msg.Payload)
				m.mu.Unlock()
			}
		}
	}
}

// confirmed closes the oldest awaited confirmation of channel. One that
// nobody awaited is a resubscription after a reconnect: a release may
// have been missed meanwhile, so the waiters are woken to look.
func (m *Mux) confirmed(channel string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	q := m.expect[channel]
	if len(q) == 0 {
		m.wake(channel, "")
		return
	}
	close(q[0].done)
	removeAt(m.expect, channel, 0)
}

// left closes the oldest awaited UNSUBSCRIBE confirmation of channel.
func (m *Mux) left(channel string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if q := m.leave[channel]; len(q) > 0 {
		close(q[0])
		removeAt(m.leave, channel, 0)
	}
}

// wake hands one message on channel to its waiters: every listener gets
// it, and of the waiters that take turns, the oldest with no wake-up
// pending. m.mu is held.
func (m *Mux) wake(channel, payload string) {
	ch := m.chans[channel]
	if ch == nil {
		return
	}
	woke := false
	for _, w := range ch.waiters {
		switch {
		case w.each:
			if !w.deliver(payload) {
				w.signal()
			}
		case !woke:
			woke = w.signal()
		}
	}
}

// Close ends the connection, fails the confirmations still awaited and
// waits for the Mux's goroutines to return. Later calls return nil.
func (m *Mux) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	for _, q := range m.expect {
		for _, c := range q {
			c.fail(ErrClosed)
		}
	}
	clear(m.expect)
	for _, q := range m.leave {
		for _, c := range q {
			close(c)
		}
	}
	clear(m.leave)
	ps := m.ps
	m.mu.Unlock()
	if ps == nil {
		return nil
	}
	close(m.stop)
	err := ps.Close()
	m.wg.Wait()
	return err
}
