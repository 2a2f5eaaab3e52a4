package redlock

import (
	"hash/fnv"
	"slices"
	"time"
)

// Gate mode. A contended attempt (one made while this driver watches the
// name, or soon after an attempt on it was refused) first asks a single
// gate node, the same one for every client of the name, and asks the other
// nodes only once the gate has granted — or failed to answer, in which
// case the attempt falls back to asking everyone. Contending waiters thus
// serialize on the gate and never split the other nodes between them: the
// loser is refused cleanly after one round trip and holds nothing, the
// winner takes the majority in a second. A first attempt, the uncontended
// case, asks every node at once: one round trip.
//
// Safety does not depend on the gate: a grant still needs a majority.

// gateOf picks name's gate: nodes ordered by address, so every client
// configured with the same nodes picks the same one, and spread over the
// nodes by a hash of the name.
func (d *redlock) gateOf(name string) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(name))
	return d.byAddr[int(h.Sum32()%uint32(len(d.byAddr)))]
}

// sortByAddr returns the node indexes ordered by address.
func sortByAddr(nodes []node) []int {
	idx := make([]int, len(nodes))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		switch {
		case nodes[a].addr < nodes[b].addr:
			return -1
		case nodes[a].addr > nodes[b].addr:
			return 1
		}
		return 0
	})
	return idx
}

// takeGated is node i's phase 1 in either mode.
func (a *attempt) takeGated(i int) p1 {
	switch {
	case a.gate < 0:
		return a.take(i)
	case i == a.gate:
		return a.take(i) // work opens the gate once this answer is sent
	}
	<-a.gateDone
	if !a.gateOpen {
		return p1{node: i, skipped: true}
	}
	return a.take(i)
}

// hotFor is how long a refused attempt keeps its name in gate mode.
const hotFor = time.Second

// contended reports whether name should be taken in gate mode: this driver
// has waiters on it, or saw it refused within hotFor.
func (h *hub) contended(name string) bool {
	return h.hot.Lately(name) || len(h.waiters(name)) > 0
}

// refused marks name as contended.
func (h *hub) refused(name string) { h.hot.Saw(name) }

// openGate records the gate's answer for the other workers. It runs after
// that answer was sent to the decider, so that the decider always sees
// the gate's refusal before the skipped nodes.
func (a *attempt) openGate(i int, r p1) {
	if i == a.gate {
		a.gateOpen = r.granted || r.err != nil
		close(a.gateDone)
	}
}
