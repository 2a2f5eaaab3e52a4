package serve

// ring keeps the newest values appended to it, at most size of them, in
// one array: once full, a new value overwrites the oldest in place, so a
// busy server records an event without copying or allocating.
type ring[T any] struct {
	buf  []T
	next int // where the next value goes once buf is full
	size int
}

func newRing[T any](size int) ring[T] { return ring[T]{size: size} }

// add appends v, forgetting the oldest value when the ring is full.
func (r *ring[T]) add(v T) {
	if len(r.buf) < r.size {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.next] = v
	r.next = (r.next + 1) % r.size
}

// len is the number of values kept.
func (r *ring[T]) len() int { return len(r.buf) }

// newest is the i-th newest value (0 is the newest), for i < r.len().
func (r *ring[T]) newest(i int) *T {
	return &r.buf[(r.next-1-i+2*len(r.buf))%len(r.buf)]
}

// oldestFirst is a copy of the values, the oldest first.
func (r *ring[T]) oldestFirst() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.next:]...)
	return append(out, r.buf[:r.next]...)
}
