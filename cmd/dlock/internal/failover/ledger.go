package failover

import (
	"slices"
	"sort"
	"sync"
	"time"
)

// Grant is one lease the load was granted, as its client saw it. The times
// are read on the harness's one monotonic clock.
type Grant struct {
	Name  string
	Fence uint64
	// Requested is when the acquire was about to be sent, Answered when
	// its answer was read, Ended when the client stopped relying on the
	// lease: just before its release was sent.
	Requested, Answered, Ended time.Time
	// TTL is the lease's TTL: the backend keeps it at least that long
	// after Requested unless it is released.
	TTL time.Duration
}

// Ledger records the load's grants and counts double grants: two grants
// of one name that break mutual exclusion or the fence order. Of two
// grants A and B of one name, with A answered first, the pair is a double
// grant when
//
//   - (fence inversion) A was answered before B was requested, yet B's
//     fence is not above A's. A was then granted on the backend before B
//     was asked for, and every backend's fences grow with each grant of a
//     name; an equal or lower fence means the fence cannot tell the two
//     holders apart, whatever their times;
//   - (overlap) B was answered while A was still held (before A's release
//     was sent) and before A's lease could have lapsed (A.Requested plus
//     its TTL: the backend's expiry is at least that). B was then granted
//     while A's lease still stood on the backend: two holders at once,
//     even if the fences are in order.
//
// Neither can be a false alarm: A's release is sent after Ended is read,
// so a grant made after the release reached the backend is answered after
// Ended; and a lease whose replica died before its release stays on the
// backend until its TTL, which the overlap rule leaves out. Legitimate
// overlaps (a holder that lost its lease and does not know it yet, with a
// lower fence that a fence guard would refuse) are left out by the TTL
// bound; the load's holds are milliseconds, far below it.
type Ledger struct {
	mu     sync.Mutex
	grants map[string][]Grant
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{grants: map[string][]Grant{}} }

// Add records one grant, once its client has stopped relying on it (or
// at the end of the run, with no Ended).
func (l *Ledger) Add(g Grant) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.grants[g.Name] = append(l.grants[g.Name], g)
}

// DoubleGrants counts the pairs of grants that break the rule, by kind.
// A grant with no Ended counts as held until the end.
func (l *Ledger) DoubleGrants() (inversions, overlaps, grants int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, gs := range l.grants {
		gs = slices.Clone(gs)
		sort.Slice(gs, func(i, j int) bool { return gs[i].Answered.Before(gs[j].Answered) })
		inversions += countInversions(gs)
		overlaps += countOverlaps(gs)
		grants += len(gs)
	}
	return inversions, overlaps, grants
}

// countInversions counts the grants B of one name (sorted by Answered)
// whose fence is not above the highest fence answered before B was
// requested.
func countInversions(gs []Grant) int {
	n := 0
	prefixMax := make([]uint64, len(gs)) // highest fence of gs[:i+1]
	for i, g := range gs {
		prefixMax[i] = g.Fence
		if i > 0 {
			prefixMax[i] = max(prefixMax[i], prefixMax[i-1])
		}
	}
	for _, b := range gs {
		k := sort.Search(len(gs), func(i int) bool { return !gs[i].Answered.Before(b.Requested) })
		if k > 0 && b.Fence <= prefixMax[k-1] {
			n++
		}
	}
	return n
}

// countOverlaps counts the grants B of one name (sorted by Answered)
// answered while an earlier grant A was still held and within A's TTL.
func countOverlaps(gs []Grant) int {
	n := 0
	var held []Grant // answered earlier, not ended yet at the current grant
	for _, b := range gs {
		held = slices.DeleteFunc(held, func(a Grant) bool { return ended(a, b.Answered) })
		for _, a := range held {
			if b.Answered.Before(a.Requested.Add(a.TTL)) {
				n++
				break
			}
		}
		held = append(held, b)
	}
	return n
}

// ended reports whether a's client had stopped relying on it by t.
func ended(a Grant, t time.Time) bool { return !a.Ended.IsZero() && !a.Ended.After(t) }
