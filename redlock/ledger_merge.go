package redlock

import (
	"slices"

	"github.com/dlockdev/dlock/driver"
)

// How the nodes' copies of a ledger make one answer. Writes go to every
// node and count when a majority took them, so a claim that stood (and
// only a claim that stood runs its job) is on a majority of the nodes,
// and every majority that answers a read includes one of them. A claim
// that failed may have reached a minority: its job never ran, and its
// record there is a leftover. So, per slot, from the highest fence down,
// a record is the slot's run when:
//
//   - a node has it with an outcome (only a claim that stood is finished),
//     or
//   - the nodes that have it, or a record of the slot with a higher fence
//     (which replaced it there), together with the nodes that did not
//     answer, make a majority: it may have stood, and taking it for the
//     slot's run is the side that never runs a slot twice.
//
// A record on a minority of the nodes when all of them answer is a
// leftover: no slot's run, and the next claim replaces it. Of a run's
// copies the one with an outcome is returned, if a node has one: an
// outcome that reached only some nodes still says how it ended.

// mergeRuns merges the ledgers of one name that the nodes answered
// (answers, one per node that answered; silent nodes did not), newest
// slot first.
func mergeRuns(answers [][]driver.RunRecord, silent, quorum int) []driver.RunRecord {
	bySlot := map[int64][]driver.RunRecord{}
	for _, runs := range answers {
		for _, r := range runs {
			bySlot[r.Slot.UnixNano()] = append(bySlot[r.Slot.UnixNano()], r)
		}
	}
	var out []driver.RunRecord
	for _, copies := range bySlot {
		if r, ok := mergeSlot(copies, silent, quorum); ok {
			out = append(out, r)
		}
	}
	slices.SortFunc(out, func(a, b driver.RunRecord) int { return b.Slot.Compare(a.Slot) })
	return out
}

// mergeSlot returns the run of one slot given its copies (at most one per
// node that answered), or false when they are leftovers only.
func mergeSlot(copies []driver.RunRecord, silent, quorum int) (driver.RunRecord, bool) {
	sorted := slices.Clone(copies)
	slices.SortStableFunc(sorted, func(a, b driver.RunRecord) int {
		switch {
		case a.Fence != b.Fence:
			return cmpDesc(a.Fence, b.Fence)
		case a.Ended.IsZero() != b.Ended.IsZero():
			return boolDesc(!a.Ended.IsZero(), !b.Ended.IsZero())
		}
		return 0
	})
	for i := 0; i < len(sorted); {
		j := i
		for j < len(sorted) && sorted[j].Fence == sorted[i].Fence {
			j++
		}
		// sorted[i] is fence group's copy with an outcome, if any; j nodes
		// have it or a higher fence.
		if !sorted[i].Ended.IsZero() || j+silent >= quorum {
			return sorted[i], true
		}
		i = j
	}
	return driver.RunRecord{}, false
}

func cmpDesc(a, b uint64) int {
	if a > b {
		return -1
	}
	return 1
}

func boolDesc(a, b bool) int {
	if a && !b {
		return -1
	}
	return 1
}
