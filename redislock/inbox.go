package redislock

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock/internal/rediscore"
)

// inbox is the one pub/sub channel on which a driver's queued waiters
// are told that the lock is handed to them, or that it is their turn to
// try: prefix + "inbox:" + 128 random bits in hex (rediscore.Keys.Inbox).
// It is subscribed on the driver's first queued wait and stays so until
// Close. A waiter registers its token, then names the inbox in its
// attempts; the acquire script records it with the waiter's request, and
// the scripts that wake a waiter (tell.lua) publish its token, a space
// and the message there. So a wait costs no SUBSCRIBE and no UNSUBSCRIBE
// of its own, and the release's message reaches the waiter through the
// Mux's reading goroutine with no other goroutine in between.
//
// A waiter whose driver could not subscribe the inbox (Redis did not
// confirm it within subscribeTimeout) listens on a channel of its own,
// named for its token, as it did before inboxes existed; scripts of an
// earlier version, which know only those channels, thus still wake the
// waiters of earlier versions. A waiter of this version queued behind a
// release of an earlier version is not told, and finds the lock when it
// next polls (waiterPoll), during a rolling upgrade only.
type inbox struct {
	channel string
	mux     *rediscore.Mux
	handler *rediscore.Waiter

	// subMu guards conf: the subscription waiters rely on. It is never
	// held while the Mux calls dispatch (which takes mu).
	subMu sync.Mutex
	conf  *rediscore.Confirm

	mu      sync.Mutex
	waiters map[string]*rediscore.Waiter // by token
}

func newInbox(keys rediscore.Keys, mux *rediscore.Mux) *inbox {
	var id [16]byte
	_, _ = cryptorand.Read(id[:])
	b := &inbox{channel: keys.Inbox(hex.EncodeToString(id[:])), mux: mux, waiters: map[string]*rediscore.Waiter{}}
	b.handler = rediscore.NewHandler(b.dispatch)
	return b
}

// dispatch routes one message: "TOKEN MSG" goes to the waiter of TOKEN,
// if it still waits. An empty payload is the Mux's wake-up after a
// reconnect, when messages may have been missed: every waiter attempts.
func (b *inbox) dispatch(payload string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if payload == "" {
		for _, w := range b.waiters {
			w.Wake()
		}
		return
	}
	token, msg, _ := strings.Cut(payload, " ")
	if w := b.waiters[token]; w != nil {
		w.Send(msg)
	}
}

// ready reports whether the inbox's subscription is in place, without
// waiting for it.
func (b *inbox) ready() bool {
	b.subMu.Lock()
	conf := b.conf
	b.subMu.Unlock()
	return confirmed(conf)
}

// open subscribes the inbox unless it is subscribed, or its SUBSCRIBE is
// on its way, and waits at most subscribeTimeout (and ctx) for Redis to
// confirm it. It reports whether the subscription is in place.
func (b *inbox) open(ctx context.Context) bool {
	b.subMu.Lock()
	conf := b.conf
	if conf == nil || failed(conf) {
		var err error
		if conf, err = b.mux.Listen(b.channel, b.handler); err != nil {
			b.subMu.Unlock()
			return false
		}
		b.conf = conf
	}
	b.subMu.Unlock()
	if confirmed(conf) {
		return true
	}
	t := time.NewTimer(subscribeTimeout)
	defer t.Stop()
	select {
	case <-conf.Done():
		return conf.Err() == nil
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

// register makes token's messages reach a new listener, until the
// returned function unregisters it. It reports false when another wait
// of the driver has token registered already (a caller that waits twice
// at once with one token): that wait listens on its own channel.
func (b *inbox) register(token string) (*rediscore.Waiter, func(), bool) {
	w := rediscore.NewListener(1)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waiters[token] != nil {
		return nil, nil, false
	}
	b.waiters[token] = w
	return w, func() {
		b.mu.Lock()
		delete(b.waiters, token)
		b.mu.Unlock()
	}, true
}

// confirmed reports whether conf is a subscription in place.
func confirmed(conf *rediscore.Confirm) bool {
	if conf == nil {
		return false
	}
	select {
	case <-conf.Done():
		return conf.Err() == nil
	default:
		return false
	}
}

// failed reports whether conf is a subscription that failed.
func failed(conf *rediscore.Confirm) bool {
	select {
	case <-conf.Done():
		return conf.Err() != nil
	default:
		return false
	}
}
