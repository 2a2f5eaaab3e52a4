package coalesce

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// call doubles in, and records how it was sent.
type call struct {
	in, out  int
	together bool
}

// sender counts what a Batcher sends, and how many sends overlap.
type sender struct {
	delay             time.Duration
	inFlight, most    atomic.Int64
	alone, batches    atomic.Int64
	batched, deadline atomic.Int64 // calls sent together; batches with a deadline
}

func (s *sender) enter() {
	n := s.inFlight.Add(1)
	for {
		m := s.most.Load()
		if n <= m || s.most.CompareAndSwap(m, n) {
			break
		}
	}
	time.Sleep(s.delay)
}

func (s *sender) one(_ context.Context, c *call) {
	s.enter()
	defer s.inFlight.Add(-1)
	s.alone.Add(1)
	c.out = 2 * c.in
}

func (s *sender) many(ctx context.Context, calls []*call) {
	s.enter()
	defer s.inFlight.Add(-1)
	s.batches.Add(1)
	s.batched.Add(int64(len(calls)))
	if _, ok := ctx.Deadline(); ok {
		s.deadline.Add(1)
	}
	for _, c := range calls {
		c.out, c.together = 2*c.in, true
	}
}

// TestAloneIsSentAlone: one goroutine's calls are each sent at once,
// alone: nothing waits for company.
func TestAloneIsSentAlone(t *testing.T) {
	s := &sender{}
	b := New(2, s.one, s.many)
	for i := range 100 {
		c := &call{in: i}
		if !b.Do(context.Background(), c) || c.out != 2*i || c.together {
			t.Fatalf("call %d: out %d, together %v", i, c.out, c.together)
		}
	}
	if s.batches.Load() != 0 {
		t.Fatalf("one goroutine's calls went in %d batches, want none", s.batches.Load())
	}
}

// TestConcurrentCallsGoTogether: 32 goroutines calling at once each get
// their own answer, in fewer sends than calls, with never more than most
// sends in flight.
func TestConcurrentCallsGoTogether(t *testing.T) {
	s := &sender{delay: time.Millisecond}
	b := New(2, s.one, s.many)
	const goroutines, calls = 32, 50
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range calls {
				c := &call{in: g*1000 + i}
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				ok := b.Do(ctx, c)
				cancel()
				if !ok || c.out != 2*c.in {
					t.Errorf("call %d: answered %v, out %d", c.in, ok, c.out)
				}
			}
		})
	}
	wg.Wait()
	total := int64(goroutines * calls)
	t.Logf("%d calls: %d alone, %d batches carrying %d", total, s.alone.Load(), s.batches.Load(), s.batched.Load())
	if got := s.alone.Load() + s.batched.Load(); got != total {
		t.Fatalf("sent %d calls for %d", got, total)
	}
	if s.alone.Load()+s.batches.Load() >= total {
		t.Fatal("nothing was sent together")
	}
	if m := s.most.Load(); m > 2 {
		t.Fatalf("%d sends in flight at once, want at most 2", m)
	}
	if s.deadline.Load() != s.batches.Load() {
		t.Fatalf("%d of %d batches of calls that all had a deadline ran with one", s.deadline.Load(), s.batches.Load())
	}
}

// TestQueuedCallReturnsByItsDeadline: behind a send that takes long, a
// queued call returns at its own deadline and is never sent, and one
// queued without a deadline is answered once the send ends.
func TestQueuedCallReturnsByItsDeadline(t *testing.T) {
	release := make(chan struct{})
	var sent sync.Map
	one := func(_ context.Context, c *call) {
		sent.Store(c.in, true)
		if c.in == 0 {
			<-release
		}
		c.out = 2 * c.in
	}
	many := func(_ context.Context, calls []*call) {
		for _, c := range calls {
			sent.Store(c.in, true)
			c.out = 2 * c.in
		}
	}
	b := New(1, one, many)
	slow := make(chan bool)
	go func() { slow <- b.Do(context.Background(), &call{in: 0}) }()
	for b.inFlightNow() == 0 {
		time.Sleep(time.Millisecond)
	}
	patient := make(chan *call)
	go func() {
		c := &call{in: 2}
		b.Do(context.Background(), c)
		patient <- c
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	start := time.Now()
	if b.Do(ctx, &call{in: 1}) {
		t.Fatal("a call queued behind a blocked send was answered")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a queued call with a 50ms deadline returned after %v", took)
	}
	close(release)
	if !<-slow {
		t.Fatal("the slow call was not answered")
	}
	if c := <-patient; c.out != 4 {
		t.Fatalf("the call queued without a deadline: out %d, want 4", c.out)
	}
	if _, ok := sent.Load(1); ok {
		t.Fatal("a call whose deadline passed while it was queued was sent")
	}
}

// inFlightNow is how many sends are in flight.
func (b *Batcher[T]) inFlightNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight
}
