package dlock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Semaphore, RWMutex and Election are built from plain locks on derived
// keys (see key), through the same driver seam, so every backend offers
// them with the same watchdog, loss signal, fences and inspection as a
// mutex, and they wait through the same wait engine (waiter).

// Kind says what a held key is: a plain lock, a semaphore permit, a read
// or write grant of a read-write lock, or a leader's term. Holder.Kind and
// Lease.Kind report it; `dlock ls` prints it.
type Kind string

// The kinds of grant.
const (
	// KindMutex is a plain lock (Acquire, TryAcquire).
	KindMutex Kind = "mutex"
	// KindPermit is one permit of a Semaphore.
	KindPermit Kind = "permit"
	// KindQueue is a Semaphore's waiting room: held by the first waiter
	// while it waits for a permit, so later waiters queue behind it.
	KindQueue Kind = "queue"
	// KindRead is a read grant of an RWMutex.
	KindRead Kind = "read"
	// KindWrite is a write grant of an RWMutex (also held for a moment by
	// a reader on its way in, which is what gives writers preference).
	KindWrite Kind = "write"
	// KindLeader is a leader's term in an Election.
	KindLeader Kind = "leader"
)

// keySep separates a primitive's name from its kind in the backend key. It
// is a control character, which validName refuses in every user name: a
// key built here can never be a user's mutex name, and parseKey can always
// split it.
const keySep = "\x1f"

// maxPrimitiveName leaves room in MaxNameLen for the kind and permit
// suffix of a primitive's backend keys.
const maxPrimitiveName = MaxNameLen - 32

// key is the backend key of one grant of a primitive: the name, the kind,
// then the kind's numbers (a semaphore permit: the permit count and index;
// a read grant: its slot).
func key(name string, kind Kind, nums ...int) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteString(keySep)
	b.WriteString(string(kind))
	for _, n := range nums {
		b.WriteString(keySep)
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// keyInfo is a backend key taken apart.
type keyInfo struct {
	name    string
	kind    Kind
	permits int // a permit's semaphore size; 0 otherwise
	slot    int // a permit's or read grant's index; -1 otherwise
}

// parseKey takes a backend key apart. A key without the separator is a
// plain lock's name.
func parseKey(k string) keyInfo {
	name, rest, ok := strings.Cut(k, keySep)
	if !ok {
		return keyInfo{name: k, kind: KindMutex, slot: -1}
	}
	parts := strings.Split(rest, keySep)
	ki := keyInfo{name: name, kind: Kind(parts[0]), slot: -1}
	num := func(i int) int {
		if i >= len(parts) {
			return -1
		}
		n, err := strconv.Atoi(parts[i])
		if err != nil {
			return -1
		}
		return n
	}
	switch ki.kind {
	case KindPermit:
		ki.permits, ki.slot = num(1), num(2)
	case KindRead:
		ki.slot = num(1)
	}
	return ki
}

// ErrKindMismatch is matched by the error of an acquire that found its name
// in use as another kind of primitive: a semaphore name held as a mutex, a
// semaphore used with two permit counts, an election name used as a
// read-write lock. errors.As with a *KindError names both uses.
var ErrKindMismatch = errors.New("dlock: lock name used as two kinds")

// KindError reports a name in use as one kind of primitive and asked for as
// another (or as a semaphore with another number of permits).
type KindError struct {
	// Name is the name both uses share.
	Name string
	// Held is the kind it is held as now, by Holder.
	Held Kind
	// HeldPermits is the held semaphore's permit count (Held == KindPermit).
	HeldPermits int
	// Holder is one holder of the other kind.
	Holder Holder
	// Wanted is the kind that was asked for.
	Wanted Kind
	// WantedPermits is the asked semaphore's permit count.
	WantedPermits int
}

// Error names the name and both kinds.
func (e *KindError) Error() string {
	return fmt.Sprintf("dlock: %q is in use as %s (held by %s); asked for as %s",
		e.Name, describeKind(e.Held, e.HeldPermits), e.Holder.Owner, describeKind(e.Wanted, e.WantedPermits))
}

// Is reports whether target is ErrKindMismatch.
func (e *KindError) Is(target error) bool { return target == ErrKindMismatch }

func describeKind(k Kind, permits int) string {
	switch k {
	case KindPermit, KindQueue:
		if permits > 0 {
			return fmt.Sprintf("a semaphore of %d permits", permits)
		}
		return "a semaphore"
	case KindRead, KindWrite:
		return "a read-write lock"
	case KindLeader:
		return "an election"
	}
	return "a mutex"
}

// family groups the kinds one primitive uses.
func family(k Kind) string {
	switch k {
	case KindPermit, KindQueue:
		return "semaphore"
	case KindRead, KindWrite:
		return "rwmutex"
	}
	return string(k)
}

// holdersOf lists the live grants of every kind under name, in one round
// trip, and fails with a *KindError when one of them belongs to another
// family than want (or, for a semaphore, has another permit count).
func (l *Locker) holdersOf(ctx context.Context, name string, want Kind, permits int) ([]Holder, error) {
	lister, err := l.lister()
	if err != nil {
		return nil, err
	}
	dhs, err := lister.List(ctx, name)
	if err != nil {
		return nil, backend("list", name, err)
	}
	var hs []Holder
	for _, dh := range dhs {
		h := holderFrom(dh)
		if h.Name != name {
			continue // another name with this one as a prefix
		}
		if family(h.Kind) != family(want) || (h.Kind == KindPermit && want == KindPermit && h.Permits != permits) {
			return nil, &KindError{Name: name, Held: h.Kind, HeldPermits: h.Permits, Holder: h, Wanted: want, WantedPermits: permits}
		}
		hs = append(hs, h)
	}
	return hs, nil
}
