package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMergeFile: a merged row replaces the row of the same scenario and
// backend, a new one joins its scenario's rows, the others stay in
// place, and the header says what was merged from which run.
func TestMergeFile(t *testing.T) {
	var old Table
	old.Add(Row{Scenario: "S1 pause", Backend: "redis", Trials: 20})
	old.Add(Row{Scenario: "S2 kill", Backend: "redis", Trials: 20})
	old.Add(Row{Scenario: "S10 clock", Backend: "redis", Trials: 20})
	path := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := old.WriteFile(path, "dlock fault suite: full run, day 1"); err != nil {
		t.Fatal(err)
	}
	var run Table
	run.Add(Row{Scenario: "S2 kill", Backend: "redis", Trials: 7})
	run.Add(Row{Scenario: "S2 kill", Backend: "mariadb", Trials: 8})
	if err := run.MergeFile(path, "dlock fault suite: full run, day 2"); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	if !strings.HasPrefix(got, "dlock fault suite: full run, day 1; 2 rows merged from full run, day 2\n") {
		t.Errorf("header: %q", strings.SplitN(got, "\n", 2)[0])
	}
	var order []string
	for _, l := range rowLines(got) {
		c := strings.Split(strings.Trim(l, "| "), " | ")
		order = append(order, c[0]+"/"+c[1]+"/"+c[3])
	}
	want := "S1 pause/redis/20 S2 kill/redis/7 S2 kill/mariadb/8 S10 clock/redis/20"
	if strings.Join(order, " ") != want {
		t.Errorf("rows %q, want %q", strings.Join(order, " "), want)
	}
	if r, err := readResults(path); err != nil || len(r.rows) != 4 {
		t.Errorf("read back: %d rows, %v", len(r.rows), err)
	}
}

// TestMergeFileRefusesOtherFiles: a file that is not a table the suite
// wrote is left alone.
func TestMergeFileRefusesOtherFiles(t *testing.T) {
	path := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(path, []byte("# notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var run Table
	run.Add(Row{Scenario: "S2 kill", Backend: "redis", Trials: 7})
	if err := run.MergeFile(path, "dlock fault suite: full run"); err == nil || !strings.Contains(err.Error(), "notes.md") {
		t.Errorf("MergeFile on a non-table: %v", err)
	}
}
