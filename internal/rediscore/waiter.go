package rediscore

// A Waiter is one waiter's end of the channels it watches on a Mux: a
// wake-up (at most one pending) on C, with a buffer each message's
// payload on Messages, or with a handler each payload passed to it.
type Waiter struct {
	c    chan struct{}
	msgs chan string          // nil unless made by NewListener with a buffer
	fn   func(payload string) // nil unless made by NewHandler
	each bool                 // woken by every message, not in turn
}

// NewWaiter returns a waiter that takes turns with the other such waiters
// of its channel: a message wakes only the oldest of them that has no
// wake-up pending. One attempt per release and per client is enough,
// since only one can win; the others keep their backoff timers as a
// fallback, so that a herd of N attempts per release becomes one.
func NewWaiter() *Waiter { return &Waiter{c: make(chan struct{}, 1)} }

// NewListener returns a waiter that every message on its channels wakes.
// With buffer > 0 it receives the messages' payloads on Messages instead
// of wake-ups on C, the oldest unread one dropped when buffer are
// waiting.
func NewListener(buffer int) *Waiter {
	w := &Waiter{c: make(chan struct{}, 1), each: true}
	if buffer > 0 {
		w.msgs = make(chan string, buffer)
	}
	return w
}

// NewHandler returns a waiter that every message on its channels wakes
// by calling fn with its payload, in the Mux's reading goroutine and
// under its lock: fn must return at once and must not call the Mux. It
// hands each message on without a goroutine of its own in between (a
// Locker's inbox, which routes each message to the waiter it names).
func NewHandler(fn func(payload string)) *Waiter {
	return &Waiter{c: make(chan struct{}, 1), fn: fn, each: true}
}

// C receives w's wake-ups.
func (w *Waiter) C() <-chan struct{} { return w.c }

// Messages receives the payloads of a listener made with a buffer; it is
// nil for other waiters.
func (w *Waiter) Messages() <-chan string { return w.msgs }

// Wake wakes w as a message with an empty payload would.
func (w *Waiter) Wake() { w.Send("") }

// Send wakes w as a message with payload would.
func (w *Waiter) Send(payload string) {
	if !w.deliver(payload) {
		w.signal()
	}
}

// signal wakes w unless a wake-up is already pending; it reports whether
// it sent one.
func (w *Waiter) signal() bool {
	select {
	case w.c <- struct{}{}:
		return true
	default:
		return false
	}
}

// deliver hands payload to a handler, or to a waiter with a buffer,
// dropping the oldest unread payload when it is full; it reports false
// for waiters with neither.
func (w *Waiter) deliver(payload string) bool {
	if w.fn != nil {
		w.fn(payload)
		return true
	}
	if w.msgs == nil {
		return false
	}
	for {
		select {
		case w.msgs <- payload:
			return true
		default:
		}
		select {
		case <-w.msgs:
		default:
		}
	}
}

// Confirm is the confirmation of a channel's SUBSCRIBE: Done is closed
// once Redis confirmed it, or once it failed (Err then says why).
type Confirm struct {
	done   chan struct{}
	err    error
	failed bool // guarded by the Mux's lock
}

func newConfirm() *Confirm { return &Confirm{done: make(chan struct{})} }

// Done is closed once the SUBSCRIBE is confirmed or failed.
func (c *Confirm) Done() <-chan struct{} { return c.done }

// Err is nil once Done is closed if the subscription is in place, else
// why it is not.
func (c *Confirm) Err() error { return c.err }

// fail closes c with err. The Mux's lock is held.
func (c *Confirm) fail(err error) {
	c.err, c.failed = err, true
	close(c.done)
}
