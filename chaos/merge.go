package chaos

import (
	"fmt"
	"os"
	"slices"
	"strings"
)

// MergeFile writes the table into the Markdown table already at path:
// a row of t replaces the file's row of the same scenario and backend,
// and is added when the file has none; the file's other rows stay. The
// file's header line is kept and says what was merged in, with header
// (this run's line), so that the file never hides which rows came from
// which run.
func (t *Table) MergeFile(path, header string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var fresh strings.Builder
	if err := t.Markdown(&fresh, ""); err != nil {
		return err
	}
	lines := strings.Split(string(old), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[0], "dlock fault suite: ") {
		return fmt.Errorf("%s: not a fault-suite table (its first line is not a run's header)", path)
	}
	added := rowLines(fresh.String())
	rows := append(keptRows(rowLines(string(old)), added), added...)
	slices.SortStableFunc(rows, func(a, b string) int {
		return strings.Compare(scenarioKey(rowScenario(a)), scenarioKey(rowScenario(b)))
	})
	var b strings.Builder
	fmt.Fprintf(&b, "%s; %d rows merged from %s\n\n", lines[0], len(added), strings.TrimPrefix(header, "dlock fault suite: "))
	b.WriteString(tableHead)
	for _, r := range rows {
		b.WriteString(r + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// tableHead is the Markdown table's heading and rule, as Markdown writes
// them.
const tableHead = "| scenario | backend | expect | trials | violations | unlinearizable | metric | p50 | p99 | verdict | note |\n" +
	"|---|---|---|---:|---:|---:|---|---:|---:|---|---|\n"

// rowLines returns the data rows of a Markdown table written by Markdown.
func rowLines(doc string) []string {
	var out []string
	for _, l := range strings.Split(doc, "\n") {
		if strings.HasPrefix(l, "| ") && !strings.HasPrefix(l, "| scenario |") {
			out = append(out, l)
		}
	}
	return out
}

// keptRows are the rows of old that no row of added replaces.
func keptRows(old, added []string) []string {
	replaced := map[string]bool{}
	for _, r := range added {
		replaced[rowKey(r)] = true
	}
	var out []string
	for _, r := range old {
		if !replaced[rowKey(r)] {
			out = append(out, r)
		}
	}
	return out
}

// rowKey is a row's scenario and backend cells.
func rowKey(line string) string {
	c := strings.SplitN(strings.Trim(line, "| "), " | ", 3)
	if len(c) < 2 {
		return line
	}
	return c[0] + " | " + c[1]
}

// rowScenario is a row's scenario cell.
func rowScenario(line string) string {
	s, _, _ := strings.Cut(rowKey(line), " | ")
	return s
}
