package chaos

import (
	"fmt"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// opKind tells the two models of a History apart.
type opKind int

const (
	opGrant opKind = iota // a lease granted with a fence
	opEnd                 // the holder stopped holding: release, or loss it was told of
	opWrite               // a fenced write offered to the resource
)

// op is the input of one recorded operation.
type op struct {
	Kind   opKind
	Client int
	Fence  uint64
	OK     bool // opWrite: the resource accepted it
}

// History records, for one lock name, every grant and every end of a
// holding, with the real-time interval in which each happened, and every
// write offered to the fenced resource with its outcome. Check tests it
// with porcupine. Times are wall-clock (UnixNano), so that child processes
// on the same host can report theirs. It is safe for concurrent use.
type History struct {
	mu  sync.Mutex
	ops []porcupine.Operation
}

func (h *History) add(o op, call, ret time.Time) {
	if ret.Before(call) {
		ret = call
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, porcupine.Operation{ClientId: o.Client, Input: o, Call: call.UnixNano(), Return: ret.UnixNano()})
}

// Grant records that client was granted the lock with fence f by a call
// that started at call and returned at ret.
func (h *History) Grant(client int, f uint64, call, ret time.Time) {
	h.add(op{Kind: opGrant, Client: client, Fence: f}, call, ret)
}

// End records that client stopped believing it holds the lock somewhere in
// [call, ret]: a Release call, or the moment it was told of a loss (call ==
// ret), or its death. A loss must be stamped where it happens (the
// instant its lease's Done closed, or as soon after as can be observed):
// a stamp taken late can fall after the next holder's grant and make the
// history unlinearizable. A holder that is never told has no End: its
// holding then lasts to the end of the history.
func (h *History) End(client int, call, ret time.Time) {
	h.add(op{Kind: opEnd, Client: client}, call, ret)
}

// Write records a write with fence f offered to the fenced resource in
// [call, ret], and whether the resource accepted it.
func (h *History) Write(client int, f uint64, accepted bool, call, ret time.Time) {
	h.add(op{Kind: opWrite, Client: client, Fence: f, OK: accepted}, call, ret)
}

// ToldFrom returns a copy of h in which every end of client's holdings may
// have happened as early as from: the history as it would be had the
// client been told at from. A history unlinearizable only because a
// holder was told of its loss late, after from, is linearizable in the
// copy; one with any other fault (a fence not above, two holders before
// from, a stale write accepted) is not. A scenario that states such an
// exemption judges the copy.
func (h *History) ToldFrom(client int, from time.Time) *History {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := &History{ops: append([]porcupine.Operation(nil), h.ops...)}
	for i, o := range c.ops {
		if in := o.Input.(op); in.Kind == opEnd && in.Client == client {
			c.ops[i].Call = min(o.Call, from.UnixNano())
		}
	}
	return c
}

// Len returns the number of recorded operations.
func (h *History) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.ops)
}

// checkTimeout bounds one porcupine check; histories here are small.
const checkTimeout = 10 * time.Second

// Check reports whether the history is linearizable against the lock
// model (a grant only while nobody holds, with a fence above every earlier
// one; an end only by the holder) and the fenced-register model (a write
// is accepted if and only if its fence is at least every accepted fence
// before it). The error says which part failed, or that the check timed
// out.
func (h *History) Check() error {
	h.mu.Lock()
	ops := append([]porcupine.Operation(nil), h.ops...)
	h.mu.Unlock()
	switch porcupine.CheckOperationsTimeout(Model, ops, checkTimeout) {
	case porcupine.Ok:
		return nil
	case porcupine.Illegal:
		return fmt.Errorf("history of %d operations is not linearizable: %s", len(ops), h.describe(ops))
	}
	return fmt.Errorf("linearizability check of %d operations timed out", len(ops))
}

func (h *History) describe(ops []porcupine.Operation) string {
	lock, write := []porcupine.Operation{}, []porcupine.Operation{}
	for _, o := range ops {
		if o.Input.(op).Kind == opWrite {
			write = append(write, o)
		} else {
			lock = append(lock, o)
		}
	}
	var parts []string
	if !porcupine.CheckOperations(Model, lock) {
		parts = append(parts, "two holders at once or a fence not above the previous grant's")
	}
	if !porcupine.CheckOperations(Model, write) {
		parts = append(parts, "the resource accepted a write with a fence below an accepted one")
	}
	return fmt.Sprint(parts)
}

// state is the model state: who holds, the last granted fence, the
// highest fence the resource accepted.
type state struct {
	Holder  int // -1: free
	Fence   uint64
	Written uint64
}

// Model is the sequential specification History.Check uses: a lock with
// strictly increasing fences, and a register that accepts a write if and
// only if its fence is not below the highest accepted. Lock operations and
// writes form separate partitions.
var Model = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		var lock, write []porcupine.Operation
		for _, o := range history {
			if o.Input.(op).Kind == opWrite {
				write = append(write, o)
			} else {
				lock = append(lock, o)
			}
		}
		return [][]porcupine.Operation{lock, write}
	},
	Init: func() any { return state{Holder: -1} },
	Step: func(st, in, _ any) (bool, any) {
		s, o := st.(state), in.(op)
		switch o.Kind {
		case opGrant:
			if s.Holder != -1 || o.Fence <= s.Fence {
				return false, s
			}
			s.Holder, s.Fence = o.Client, o.Fence
		case opEnd:
			if s.Holder != o.Client {
				return false, s
			}
			s.Holder = -1
		case opWrite:
			if o.OK != (o.Fence >= s.Written) {
				return false, s
			}
			if o.OK {
				s.Written = o.Fence
			}
		}
		return true, s
	},
	DescribeOperation: func(in, _ any) string {
		o := in.(op)
		switch o.Kind {
		case opGrant:
			return fmt.Sprintf("grant(c%d, fence %d)", o.Client, o.Fence)
		case opEnd:
			return fmt.Sprintf("end(c%d)", o.Client)
		}
		return fmt.Sprintf("write(c%d, fence %d) ok=%v", o.Client, o.Fence, o.OK)
	},
}
