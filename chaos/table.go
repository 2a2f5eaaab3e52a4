package chaos

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// Expectation says what a row must show to pass.
type Expectation int

const (
	// ExpectSafe rows must have zero violations and, when they record
	// histories, zero unlinearizable ones.
	ExpectSafe Expectation = iota
	// ExpectViolation rows are negative controls: they must reproduce the
	// known violation at least once, and, when they record histories, the
	// checker must refuse at least one, or the suite is blind to it.
	ExpectViolation
	// ExpectReport rows measure and report without a pass/fail rule
	// (a property documented rather than promised).
	ExpectReport
	// ExpectExempt rows are judged as ExpectSafe, except that trials
	// showing one stated exception (Row.Exempt says which and why) are
	// counted apart, in Row.Exempted, instead of failing the row. The
	// table prints them as "EXEMPT n of N", never as PASS; a row without
	// a stated reason fails.
	ExpectExempt
)

// String is the short form used in the table.
func (e Expectation) String() string {
	switch e {
	case ExpectSafe:
		return "0"
	case ExpectViolation:
		return "≥1 (control)"
	case ExpectExempt:
		return "0 (exemption stated)"
	}
	return "report"
}

// Row is one verdict: a scenario case run against one backend.
type Row struct {
	// Scenario is the scenario's label and case, e.g. "S1 pause, fenced".
	Scenario string
	// Backend names the backend and its mode, e.g. "postgres (lease)".
	Backend string
	// Expect is the rule the row is judged by.
	Expect Expectation
	// Trials is how many trials ran.
	Trials int
	// Violations counts trials that broke the scenario's property.
	Violations int
	// Unlinearizable counts trials whose recorded history porcupine could
	// not linearize; -1 when the scenario records no history.
	Unlinearizable int
	// Exempted counts, in an ExpectExempt row, the trials whose
	// unlinearizable history the exemption explains.
	Exempted int
	// Exempt is an ExpectExempt row's exception and the reason for it.
	Exempt string
	// Metric names what Timings measure, e.g. "kill→grant".
	Metric string
	// Timings are one measurement per trial (or per event).
	Timings []time.Duration
	// Note is a short free-text remark (counts of a secondary outcome).
	Note string
	// Known, when set, names the open bug a failing row is expected to
	// show until its driver is fixed.
	Known string
}

// Pass reports whether the row meets its expectation. The checker gates
// the verdict: an unlinearizable history fails a safety row even when the
// row's own rules counted no violation, and a control passes only when
// the checker refused one of its histories too.
func (r Row) Pass() bool {
	switch r.Expect {
	case ExpectSafe:
		return r.Violations == 0 && r.Unlinearizable <= 0
	case ExpectExempt:
		return r.Exempt != "" && r.Violations == 0 && r.Unlinearizable <= r.Exempted
	case ExpectViolation:
		return r.Violations > 0 && r.Unlinearizable != 0
	}
	return true
}

func (r Row) verdict() string {
	switch {
	case r.Expect == ExpectReport:
		return "measured"
	case r.Pass() && r.Expect == ExpectViolation:
		return "PASS (reproduced)"
	case r.Pass() && r.Expect == ExpectExempt:
		return fmt.Sprintf("EXEMPT %d of %d", r.Exempted, r.Trials)
	case r.Pass():
		return "PASS"
	case r.Expect == ExpectViolation && r.Violations > 0:
		return "FAIL (checker blind: no history refused)"
	case r.Expect == ExpectViolation:
		return "FAIL (blind: not reproduced)"
	case r.Expect == ExpectExempt && r.Exempt == "":
		return "FAIL (exemption without a reason)"
	case r.Known != "":
		return "FAIL (open bug: " + r.Known + ")"
	case r.Violations == 0:
		return "FAIL (unlinearizable)"
	}
	return "FAIL"
}

// Table collects rows from concurrent scenarios. The zero value is ready.
type Table struct {
	mu   sync.Mutex
	rows []Row
}

// Add appends a row.
func (t *Table) Add(r Row) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.rows = append(t.rows, r)
}

// Rows returns a copy of the rows, sorted by scenario then backend.
func (t *Table) Rows() []Row {
	t.mu.Lock()
	defer t.mu.Unlock()
	rows := slices.Clone(t.rows)
	slices.SortStableFunc(rows, func(a, b Row) int {
		return strings.Compare(scenarioKey(a.Scenario), scenarioKey(b.Scenario))
	})
	return rows
}

// scenarioKey sorts S10 after S9.
func scenarioKey(s string) string {
	var n int
	if _, err := fmt.Sscanf(s, "S%d", &n); err == nil {
		return fmt.Sprintf("S%02d%s", n, s)
	}
	return s
}

// Markdown writes the table as a Markdown table, with a header line
// saying how it was produced.
func (t *Table) Markdown(w io.Writer, header string) error {
	var b strings.Builder
	if header != "" {
		fmt.Fprintf(&b, "%s\n\n", header)
	}
	b.WriteString("| scenario | backend | expect | trials | violations | unlinearizable | metric | p50 | p99 | verdict | note |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---|---:|---:|---|---|\n")
	for _, r := range t.Rows() {
		lin := "–"
		if r.Unlinearizable >= 0 {
			lin = fmt.Sprint(r.Unlinearizable)
		}
		p50, p99 := "–", "–"
		if len(r.Timings) > 0 {
			p50, p99 = fmtDur(Percentile(r.Timings, 50)), fmtDur(Percentile(r.Timings, 99))
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s |\n",
			r.Scenario, r.Backend, r.Expect, r.Trials, r.Violations, lin, dash(r.Metric), p50, p99, r.verdict(), dash(r.note()))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteFile writes the Markdown table to path.
func (t *Table) WriteFile(path, header string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := t.Markdown(f, header); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// note is the Note column: the row's note and, for an exempt row, its
// stated exception.
func (r Row) note() string {
	if r.Expect != ExpectExempt || r.Exempt == "" {
		return r.Note
	}
	if r.Note == "" {
		return "exempt: " + r.Exempt
	}
	return r.Note + "; exempt: " + r.Exempt
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return strings.ReplaceAll(s, "|", "/")
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= 10*time.Second:
		return d.Round(100 * time.Millisecond).String()
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}
