package filelock

import (
	"context"
	"sync"

	"github.com/dlockdev/dlock/driver"
)

// flights lets concurrent attempts on one name in this process share one
// trip to the database: while an attempt by one token is in flight, an
// attempt by another token waits for it and reports its outcome (the name
// is then held, by the first token or by whoever it found). That answer
// was true at a moment during the second call, so it is a fair report of
// one attempt; what it saves is the queue of doomed attempts that a herd of
// local waiters would otherwise put in front of the holder's refresh and
// release on the single connection.
type flights struct {
	mu sync.Mutex
	m  map[string]*flight
}

type flight struct {
	req   driver.Request
	done  chan struct{}
	grant driver.Grant
	err   error
}

// do runs attempt for req, or shares the attempt in flight for req.Name.
func (fs *flights) do(ctx context.Context, req driver.Request, attempt func() (driver.Grant, error)) (driver.Grant, error) {
	for {
		f, leader := fs.join(req)
		if leader {
			f.grant, f.err = attempt()
			fs.land(f)
			return f.grant, f.err
		}
		if f == nil { // the same token already in flight: no sharing
			return attempt()
		}
		select {
		case <-f.done:
		case <-ctx.Done():
			return driver.Grant{}, ctx.Err()
		}
		if f.err == nil {
			return driver.Grant{Holder: f.holder()}, nil
		}
		// The leader failed (its own context, perhaps): try for ourselves.
	}
}

func (fs *flights) join(req driver.Request) (f *flight, leader bool) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if f = fs.m[req.Name]; f != nil {
		if f.req.Token == req.Token {
			return nil, false
		}
		return f, false
	}
	if fs.m == nil {
		fs.m = map[string]*flight{}
	}
	f = &flight{req: req, done: make(chan struct{})}
	fs.m[req.Name] = f
	return f, true
}

func (fs *flights) land(f *flight) {
	fs.mu.Lock()
	delete(fs.m, f.req.Name)
	fs.mu.Unlock()
	close(f.done)
}

// holder is who holds the name after the flight: its own token if it won.
func (f *flight) holder() driver.Holder {
	if !f.grant.Acquired {
		return f.grant.Holder
	}
	ttl := f.grant.TTL
	if ttl == 0 {
		ttl = f.req.TTL
	}
	return driver.Holder{Name: f.req.Name, Owner: f.req.Owner, Fence: f.grant.Fence, TTL: ttl}
}
