package demo

import (
	"bytes"
	"errors"
	"strings"
	"testing"
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
