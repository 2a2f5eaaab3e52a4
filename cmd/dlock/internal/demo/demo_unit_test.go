package demo

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

func TestDemoPick(t *testing.T) {
	o := &Options{}
	got, err := o.pick()
	if err != nil || len(got) != len(tour) {
		t.Fatalf("tour: %v %v", got, err)
	}
	o.Scenario = "nope"
	var ue *UsageError
	if _, err := o.pick(); !errors.As(err, &ue) {
		t.Errorf("unknown scenario: %v, want a *UsageError", err)
	}
	o.Scenario = "all"
	if got, _ := o.pick(); len(got) != len(scenarios) {
		t.Errorf("all: %d scenarios", len(got))
	}
}

func TestOverlaps(t *testing.T) {
	if overlaps([]interval{{started: 0, ended: 10}, {started: 10, ended: 20}}) {
		t.Error("touching intervals overlap?")
	}
	if !overlaps([]interval{{started: 0, ended: 30}, {started: 10, ended: 20}, {started: 40, ended: 50}}) {
		t.Error("nested intervals do not overlap?")
	}
}

// TestDemoList: Run with "list" prints every scenario and succeeds, even
// with options that a run would refuse.
func TestDemoList(t *testing.T) {
	var out bytes.Buffer
	if err := Run(t.Context(), Options{Scenario: "list"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios {
		if !strings.Contains(out.String(), s.name) {
			t.Errorf("demo list lacks %q:\n%s", s.name, out.String())
		}
	}
}

// TestErrorLine: the timeline's error lines read as the dlock command's.
func TestErrorLine(t *testing.T) {
	for in, want := range map[string]string{
		"dlock: dlock: lost\nlease": "dlock: lost lease",
		"plain":                     "dlock: plain",
	} {
		if got := errorLine(errors.New(in)); got != want {
			t.Errorf("errorLine(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestElectionVerdict: the election scenario fails unless the naive run
// shows both leaders' writes and the fenced run refuses the old leader's.
func TestElectionVerdict(t *testing.T) {
	b := writeAttempt{proc: "B", fence: 2, accepted: true}
	a := writeAttempt{proc: "A", fence: 1, accepted: true}
	refused := a
	refused.accepted = false
	good := leaderWrites{log: []writeAttempt{b, refused}}
	double := leaderWrites{log: []writeAttempt{b, a}}
	for name, c := range map[string]struct {
		naive, fenced leaderWrites
		ok            bool
	}{
		"taught":                 {double, good, true},
		"naive refused A":        {good, good, false},
		"naive missed A":         {leaderWrites{log: []writeAttempt{b}}, good, false},
		"fenced accepted A":      {double, double, false},
		"A wrote before B":       {leaderWrites{log: []writeAttempt{a, b}}, good, false},
		"fenced: nobody elected": {double, leaderWrites{}, false},
	} {
		if v, ok := electionVerdict(c.naive, c.fenced); ok != c.ok {
			t.Errorf("%s: ok %v, want %v (%s)", name, ok, c.ok, v)
		}
	}
}

// TestSemaphoreVerdict: the semaphore scenario fails unless the new holder
// got the crashed holder's permit, with a higher fence, within the bound.
func TestSemaphoreVerdict(t *testing.T) {
	c := dlock.Holder{Slot: 0, Fence: 3}
	ttl := time.Second
	for name, tc := range map[string]struct {
		d     dlock.Holder
		freed time.Duration
		ok    bool
	}{
		"taught":        {dlock.Holder{Slot: 0, Fence: 4}, ttl, true},
		"same fence":    {dlock.Holder{Slot: 0, Fence: 3}, ttl, false},
		"other permit":  {dlock.Holder{Slot: 1, Fence: 9}, ttl, false},
		"never got one": {dlock.Holder{Slot: -1}, ttl, false},
		"too late":      {dlock.Holder{Slot: 0, Fence: 4}, 5 * ttl, false},
	} {
		if v, ok := semaphoreVerdict(c, tc.d, tc.freed, ttl); ok != tc.ok {
			t.Errorf("%s: ok %v, want %v (%s)", name, ok, tc.ok, v)
		}
	}
}
