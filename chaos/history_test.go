package chaos

import (
	"strings"
	"testing"
	"time"
)

// at returns a time ms milliseconds after a fixed origin.
func at(ms int) time.Time {
	return time.Unix(1_800_000_000, 0).Add(time.Duration(ms) * time.Millisecond)
}

func TestHistoryAcceptsSequentialGrants(t *testing.T) {
	var h History
	h.Grant(1, 10, at(0), at(5))
	h.Write(1, 10, true, at(6), at(7))
	h.End(1, at(8), at(9))
	h.Grant(2, 11, at(10), at(12))
	h.Write(2, 11, true, at(13), at(14))
	h.Write(1, 10, false, at(15), at(16)) // the stale holder is rejected
	h.End(2, at(17), at(17))
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
}

// TestHistoryConcurrentOverlapIsLinearizable: a release and a grant whose
// intervals overlap may be ordered either way.
func TestHistoryConcurrentOverlapIsLinearizable(t *testing.T) {
	var h History
	h.Grant(1, 1, at(0), at(1))
	h.End(1, at(5), at(20))
	h.Grant(2, 2, at(10), at(15))
	if err := h.Check(); err != nil {
		t.Fatal(err)
	}
}

// The checker must not be blind: each broken history is refused.
func TestHistoryRejectsBrokenHistories(t *testing.T) {
	cases := map[string]func(h *History){
		"double grant": func(h *History) {
			h.Grant(1, 1, at(0), at(1))
			h.Grant(2, 2, at(2), at(3))
			h.End(1, at(4), at(5))
		},
		"fence backwards": func(h *History) {
			h.Grant(1, 5, at(0), at(1))
			h.End(1, at(2), at(3))
			h.Grant(2, 4, at(4), at(5))
		},
		"fence repeated": func(h *History) {
			h.Grant(1, 5, at(0), at(1))
			h.End(1, at(2), at(3))
			h.Grant(2, 5, at(4), at(5))
		},
		"end by non-holder": func(h *History) {
			h.Grant(1, 1, at(0), at(1))
			h.End(2, at(2), at(3))
		},
		"stale write accepted": func(h *History) {
			h.Write(2, 11, true, at(0), at(1))
			h.Write(1, 10, true, at(2), at(3))
		},
		"fresh write rejected": func(h *History) {
			h.Write(1, 10, true, at(0), at(1))
			h.Write(2, 11, false, at(2), at(3))
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) {
			var h History
			build(&h)
			if err := h.Check(); err == nil {
				t.Fatalf("a broken history (%s) was accepted", name)
			} else {
				t.Log(err)
			}
		})
	}
}

func TestPercentile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for p, want := range map[float64]time.Duration{0: 1, 50: 3, 99: 5, 100: 5} {
		if got := Percentile(ds, p); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", p, got, want)
		}
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile(nil) != 0")
	}
}

// overlapping is a history that is really wrong: client 2 is granted while
// client 1 holds, and client 1 is never told of a loss: it releases after
// the second grant.
func overlapping(h *History) {
	h.Grant(1, 1, at(0), at(2))
	h.Grant(2, 2, at(10), at(12))
	h.End(1, at(20), at(22))
	h.End(2, at(30), at(32))
}

// TestRowFailsOnUnlinearizableHistory: a safety row whose only fault is an
// unlinearizable history fails, however many violations its own rules
// counted (none here).
func TestRowFailsOnUnlinearizableHistory(t *testing.T) {
	var h History
	overlapping(&h)
	err := h.Check()
	if err == nil {
		t.Fatal("two holders whose holdings overlap, with no loss, were accepted")
	}
	t.Log(err)
	row := Row{Scenario: "two holders at once", Backend: "history", Expect: ExpectSafe, Trials: 1, Unlinearizable: 1}
	var tab Table
	tab.Add(row)
	var out strings.Builder
	if err := tab.Markdown(&out, ""); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	if row.Pass() {
		t.Errorf("a row with an unlinearizable history passed: %q", row.verdict())
	}
	if !strings.HasPrefix(row.verdict(), "FAIL") {
		t.Errorf("verdict %q, want FAIL", row.verdict())
	}
}

// TestHistoryToldFrom: a holder told late, after a fault, is explained by
// taking it to have stopped at the fault; nothing else is.
func TestHistoryToldFrom(t *testing.T) {
	fault := at(5)
	cases := []struct {
		name  string
		build func(h *History)
		ok    bool
	}{
		{"told after the next grant, granted after the fault", func(h *History) {
			h.Grant(1, 1, at(0), at(1))
			h.Grant(2, 2, at(6), at(8))
			h.End(1, at(10), at(10))
		}, true},
		{"next grant before the fault", func(h *History) {
			h.Grant(1, 1, at(0), at(1))
			h.Grant(2, 2, at(2), at(3))
			h.End(1, at(10), at(10))
		}, false},
		{"fence not above", func(h *History) {
			h.Grant(1, 5, at(0), at(1))
			h.Grant(2, 4, at(6), at(8))
			h.End(1, at(10), at(10))
		}, false},
		{"another client told late", func(h *History) {
			h.Grant(2, 1, at(0), at(1))
			h.Grant(1, 2, at(6), at(8))
			h.End(2, at(10), at(10))
		}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var h History
			c.build(&h)
			if h.Check() == nil {
				t.Fatal("the history was linearizable before widening: the case tests nothing")
			}
			err := h.ToldFrom(1, fault).Check()
			if (err == nil) != c.ok {
				t.Errorf("ToldFrom(1, fault).Check() = %v, want linearizable: %v", err, c.ok)
			}
			if h.Check() == nil {
				t.Error("ToldFrom changed the original history")
			}
		})
	}
}
