package pglock

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/dlockdev/dlock/driver"
)

var (
	_ driver.EvictionWatcher = (*leases)(nil)
	_ driver.EvictionWatcher = (*advisory)(nil)
)

// The NOTIFY payload of a force-release is {"evict": name, "fence": n},
// the evicted grant's name and fence, built in SQL: leaseEvictPayload
// from the evicted row h, advisoryEvictPayload from parameters $2 and $3.
// A payload is at most 8000 bytes: a statement notifies only when
// octet_length(name) is below maxNotifyName, and a longer name is evicted
// without notice (its holder learns at its next refresh).
const (
	leaseEvictPayload    = `json_build_object('evict', h.name, 'fence', h.fence)::text`
	advisoryEvictPayload = `json_build_object('evict', $2::text, 'fence', $3::bigint)::text`
)

// maxNotifyName bounds, in bytes, the names whose eviction is notified
// (leaving room in the 8000-byte payload for JSON escapes of the usual
// names and the fence).
const maxNotifyName = "4000"

// evictionNotice is the payload's shape.
type evictionNotice struct {
	Evict *string `json:"evict"`
	Fence uint64  `json:"fence"`
}

// parseEviction reads a force-release's payload; ok is false for any other
// payload (a waiter's token).
func parseEviction(payload string) (driver.Eviction, bool) {
	if !strings.HasPrefix(payload, "{") {
		return driver.Eviction{}, false
	}
	var n evictionNotice
	if err := json.Unmarshal([]byte(payload), &n); err != nil || n.Evict == nil {
		return driver.Eviction{}, false
	}
	return driver.Eviction{Name: *n.Evict, Fence: n.Fence}, true
}

// evictionBuffer is how many evictions a watcher's channel holds; more are
// dropped for that watcher (its holders learn at their next refresh).
const evictionBuffer = 16

// WatchEvictions subscribes to the force-releases announced on the
// listener's channel. The LISTEN is active when it returns. The channel
// is closed if the listening connection fails.
func (l *listener) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	if err := l.ensure(ctx); err != nil {
		return nil, nil, err
	}
	ch := make(chan driver.Eviction, evictionBuffer)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.running { // the connection failed since ensure
		close(ch)
		return ch, func() {}, nil
	}
	l.evicts[ch] = struct{}{}
	return ch, func() { l.unwatchEvictions(ch) }, nil
}

func (l *listener) unwatchEvictions(ch chan driver.Eviction) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.evicts, ch)
}

// evicted hands e to every eviction watcher, without blocking.
func (l *listener) evicted(e driver.Eviction) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for ch := range l.evicts {
		select {
		case ch <- e:
		default:
		}
	}
}

// WatchEvictions (driver.EvictionWatcher) subscribes to the
// force-releases of this table's locks, by any client: ForceRelease
// notifies them on the table's channel in the transaction that evicts.
func (d *leases) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	return d.listener.WatchEvictions(ctx)
}

// WatchEvictions (driver.EvictionWatcher) subscribes to the
// force-releases of this prefix's locks, by any client: ForceRelease
// notifies them, with the new fence, before it terminates the holder's
// backend.
func (d *advisory) WatchEvictions(ctx context.Context) (<-chan driver.Eviction, func(), error) {
	return d.listener.WatchEvictions(ctx)
}
