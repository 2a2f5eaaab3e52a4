package chaos

import (
	"strings"
	"testing"
)

// TestRowVerdicts: the verdict of each kind of row, and that the checker
// gates it.
func TestRowVerdicts(t *testing.T) {
	const reason = "the server sees the fault first"
	cases := []struct {
		name string
		row  Row
		pass bool
		want string
	}{
		{"safe", Row{Expect: ExpectSafe, Trials: 20}, true, "PASS"},
		{"safe without history", Row{Expect: ExpectSafe, Trials: 20, Unlinearizable: -1}, true, "PASS"},
		{"safe, violation", Row{Expect: ExpectSafe, Trials: 20, Violations: 1}, false, "FAIL"},
		{"safe, unlinearizable only", Row{Expect: ExpectSafe, Trials: 20, Unlinearizable: 1}, false, "FAIL (unlinearizable)"},
		{"control reproduced", Row{Expect: ExpectViolation, Trials: 20, Violations: 3, Unlinearizable: 3}, true, "PASS (reproduced)"},
		{"control without history", Row{Expect: ExpectViolation, Trials: 20, Violations: 3, Unlinearizable: -1}, true, "PASS (reproduced)"},
		{"control, checker blind", Row{Expect: ExpectViolation, Trials: 20, Violations: 3}, false, "FAIL (checker blind: no history refused)"},
		{"control not reproduced", Row{Expect: ExpectViolation, Trials: 20}, false, "FAIL (blind: not reproduced)"},
		{"exempt", Row{Expect: ExpectExempt, Exempt: reason, Trials: 20, Unlinearizable: 5, Exempted: 5}, true, "EXEMPT 5 of 20"},
		{"exempt, none seen", Row{Expect: ExpectExempt, Exempt: reason, Trials: 20}, true, "EXEMPT 0 of 20"},
		{"exempt, one not explained", Row{Expect: ExpectExempt, Exempt: reason, Trials: 20, Unlinearizable: 6, Exempted: 5}, false, "FAIL (unlinearizable)"},
		{"exempt, violation", Row{Expect: ExpectExempt, Exempt: reason, Trials: 20, Violations: 1, Unlinearizable: 5, Exempted: 5}, false, "FAIL"},
		{"exempt without a reason", Row{Expect: ExpectExempt, Trials: 20, Unlinearizable: 5, Exempted: 5}, false, "FAIL (exemption without a reason)"},
		{"report", Row{Expect: ExpectReport, Trials: 20, Violations: 2, Unlinearizable: 2}, true, "measured"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := c.row.Pass(); got != c.pass {
				t.Errorf("Pass() = %v, want %v", got, c.pass)
			}
			if got := c.row.verdict(); got != c.want {
				t.Errorf("verdict %q, want %q", got, c.want)
			}
		})
	}
}

// TestExemptRowPrintsItsReason: an exempt row's note carries its stated
// exception, and its verdict is never PASS.
func TestExemptRowPrintsItsReason(t *testing.T) {
	var tab Table
	tab.Add(Row{Scenario: "S7 reset", Backend: "postgres (advisory)", Expect: ExpectExempt, Trials: 20,
		Unlinearizable: 5, Exempted: 5, Note: "overlap: 5", Exempt: "the server sees the reset first"})
	var out strings.Builder
	if err := tab.Markdown(&out, ""); err != nil {
		t.Fatal(err)
	}
	t.Logf("\n%s", out.String())
	line := strings.Split(strings.TrimSpace(out.String()), "\n")[2]
	for _, want := range []string{"| 0 (exemption stated) |", "| EXEMPT 5 of 20 |", "overlap: 5; exempt: the server sees the reset first"} {
		if !strings.Contains(line, want) {
			t.Errorf("row %q lacks %q", line, want)
		}
	}
	if strings.Contains(line, "PASS") {
		t.Errorf("an exempt row printed PASS: %q", line)
	}
}
