package serve

import (
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Failed authentication per client address: a burst, then a few per
// second. Past it, every request from the address that needs
// authentication is answered 429 before its credentials are looked at,
// so a guess made then tells nothing.
const (
	authFailBurst   = 10
	authFailPerSec  = 2
	maxAuthFailAddr = 10000 // addresses tracked at once
)

// failLimiter keeps a bucket of failed authentications per address.
type failLimiter struct {
	mu sync.Mutex
	m  map[string]*rate.Limiter
}

func newFailLimiter() *failLimiter { return &failLimiter{m: map[string]*rate.Limiter{}} }

// blocked reports whether addr has used up its failures for now.
func (f *failLimiter) blocked(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	lim, ok := f.m[addr]
	return ok && lim.Tokens() < 1
}

// fail counts a failure from addr; false means it was over the limit.
func (f *failLimiter) fail(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	lim, ok := f.m[addr]
	if !ok {
		f.makeRoom()
		lim = rate.NewLimiter(authFailPerSec, authFailBurst)
		f.m[addr] = lim
	}
	return lim.Allow()
}

// makeRoom bounds the map: full buckets carry nothing and go first; if
// every address is failing at once, the map starts over (f.mu held).
func (f *failLimiter) makeRoom() {
	if len(f.m) < maxAuthFailAddr {
		return
	}
	for k, lim := range f.m {
		if lim.Tokens() >= authFailBurst {
			delete(f.m, k)
		}
	}
	if len(f.m) >= maxAuthFailAddr {
		clear(f.m)
	}
}

// tooManyFailures answers 429 to a client address over its failures.
func tooManyFailures(w http.ResponseWriter) {
	refuse(w)
	w.Header().Set("Retry-After", retryAfter(time.Second/authFailPerSec))
	writeProblem(w, http.StatusTooManyRequests, "rate-limited", "Too many failed authentications",
		"too many failed authentications from this address; retry after the Retry-After seconds")
}
