package dlock

import (
	"container/heap"
	"time"
)

// dueQueue holds a watchdog's schedules in a heap, the one the loop must
// look at first (schedule.due) on top. The loop then visits only the
// leases it has something to do for, not every lease at each wake-up: a
// Locker holding 100,000 leases, woken at each of the hundreds of batch
// refreshes a tick needs, spent 65% of its CPU walking them all.
type dueQueue []*schedule

func (q dueQueue) Len() int           { return len(q) }
func (q dueQueue) Less(i, j int) bool { return q[i].due().Before(q[j].due()) }
func (q dueQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].at, q[j].at = i, j
}

// Push and Pop are heap.Interface's; use heap.Push and heap.Pop.
func (q *dueQueue) Push(x any) {
	s := x.(*schedule)
	s.at = len(*q)
	*q = append(*q, s)
}

func (q *dueQueue) Pop() any {
	old := *q
	s := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	s.at = -1
	return s
}

// fix restores the heap after s's times or state changed.
func (q *dueQueue) fix(s *schedule) {
	if s.at >= 0 {
		heap.Fix(q, s.at)
	}
}

// remove takes s out of the heap, if in it.
func (q *dueQueue) remove(s *schedule) {
	if s.at >= 0 {
		heap.Remove(q, s.at)
	}
}

// next is when the loop must look again: the top's due time, or after
// an hour when the queue is empty.
func (q dueQueue) next(now time.Time) time.Time {
	next := now.Add(time.Hour)
	if len(q) > 0 {
		next = earliest(next, q[0].due())
	}
	return next
}
