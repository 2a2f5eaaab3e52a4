package chaos

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/dlockdev/dlock/internal/docblock"
)

// The fault-suite summary at the top of docs/chaos.md is rendered from the
// committed results of the last full run (chaos/RESULTS.md, which `make
// chaos` writes), so that no figure of it is typed by hand:
// TestPublishedSummaryCurrent fails while the block differs from what
// RESULTS.md renders.

// ResultsFile and SummaryFile are the documents, relative to the module
// root; SummaryBlock names the summary's block in SummaryFile.
const (
	ResultsFile  = "chaos/RESULTS.md"
	SummaryFile  = "docs/chaos.md"
	SummaryBlock = "chaos-summary"
)

// Unrendered are the documents that carry no fault-suite block: the
// README links to SummaryFile, so a block left there would have no
// renderer (see docblock.Verify).
var Unrendered = []string{"README.md"}

// resultRow is one row of RESULTS.md, as written by Table.Markdown.
type resultRow struct {
	scenario, backend, expect string
	trials, violations, unlin int
	metric, p50, p99, verdict string
	note                      string
}

// fileResults is RESULTS.md read back: its header line and rows.
type fileResults struct {
	header string
	rows   []resultRow
}

// readResults parses a RESULTS.md.
func readResults(path string) (fileResults, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return fileResults{}, err
	}
	var r fileResults
	for i, line := range strings.Split(string(b), "\n") {
		switch {
		case i == 0:
			r.header = strings.TrimSpace(line)
		case !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| scenario |"):
		default:
			row, err := parseRow(line)
			if err != nil {
				return fileResults{}, fmt.Errorf("%s line %d: %w", path, i+1, err)
			}
			r.rows = append(r.rows, row)
		}
	}
	if len(r.rows) == 0 {
		return fileResults{}, fmt.Errorf("%s: no rows", path)
	}
	return r, nil
}

func parseRow(line string) (resultRow, error) {
	c := strings.Split(strings.Trim(line, "| "), " | ")
	if len(c) != 11 {
		return resultRow{}, fmt.Errorf("%d cells, want 11", len(c))
	}
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			return -1 // "–": not recorded
		}
		return n
	}
	return resultRow{scenario: c[0], backend: c[1], expect: c[2], trials: num(c[3]), violations: num(c[4]),
		unlin: num(c[5]), metric: c[6], p50: c[7], p99: c[8], verdict: c[9], note: c[10]}, nil
}

// kind says how a row is judged, from its expect column.
func (r resultRow) kind() string {
	switch {
	case strings.HasPrefix(r.expect, "≥1"):
		return "control"
	case strings.HasPrefix(r.expect, "0 (exemption"):
		return "exempt"
	case r.expect == "report":
		return "report"
	}
	return "safety"
}

func (r resultRow) where() string { return r.scenario + " on " + r.backend }

// Summary renders the summary's block: the run, then every row that is
// not a plain pass, and the totals of those that are. link is the path of
// RESULTS.md relative to the document the block is in.
func (r fileResults) Summary(link string) string {
	var b strings.Builder
	trials := 0
	var safety, safetyPass, controls, controlsOK, fencedTrials, staleWrites int
	var failed, exempt, control, measured []string
	for _, row := range r.rows {
		trials += row.trials
		switch row.kind() {
		case "safety":
			safety++
			if strings.HasPrefix(row.verdict, "PASS") {
				safetyPass++
			} else {
				failed = append(failed, fmt.Sprintf("%s: %s, %d violations and %d unlinearizable histories in %d trials",
					row.where(), row.verdict, row.violations, max(row.unlin, 0), row.trials))
			}
			if strings.Contains(row.scenario, "fenced (stale writes accepted)") {
				fencedTrials += row.trials
				staleWrites += row.violations
			}
		case "control":
			controls++
			if strings.HasPrefix(row.verdict, "PASS") {
				controlsOK++
			} else {
				failed = append(failed, fmt.Sprintf("%s: %s", row.where(), row.verdict))
			}
			label, _, _ := strings.Cut(row.scenario, " ")
			control = append(control, fmt.Sprintf("%s on %s %d/%d", label, row.backend, row.violations, row.trials))
		case "report":
			measured = append(measured, fmt.Sprintf("%s: %s", row.where(), row.note))
		case "exempt":
			exempt = append(exempt, fmt.Sprintf("%s: %s trials had two holders at once, stated not passed", row.where(), strings.TrimPrefix(row.verdict, "EXEMPT ")))
		}
	}
	fmt.Fprintf(&b, "From [chaos/RESULTS.md](%s) — %s: %d rows, %d trials.\n\n", link, strings.TrimPrefix(r.header, "dlock fault suite: "), len(r.rows), trials)
	fmt.Fprintf(&b, "- Safety rows (0 violations and 0 unlinearizable histories expected): **%d of %d pass**; the fenced paths accepted **%d stale writes in %d trials**.\n", safetyPass, safety, staleWrites, fencedTrials)
	fmt.Fprintf(&b, "- Negative controls (each must reproduce its violation and have the checker refuse it): **%d of %d reproduced** (%s).\n", controlsOK, controls, strings.Join(control, ", "))
	for _, m := range measured {
		fmt.Fprintf(&b, "- Measured: %s.\n", m)
	}
	for _, e := range exempt {
		fmt.Fprintf(&b, "- Exempt: %s.\n", e)
	}
	for _, f := range failed {
		fmt.Fprintf(&b, "- **Failed**: %s.\n", f)
	}
	return b.String()
}

// Blocks are the fault suite's generated blocks under the module root.
func Blocks(root string) []docblock.Block {
	link, err := filepath.Rel(filepath.Dir(SummaryFile), ResultsFile)
	return []docblock.Block{{File: filepath.Join(root, SummaryFile), Name: SummaryBlock, Render: func() (string, error) {
		if err != nil {
			return "", err
		}
		r, err := readResults(filepath.Join(root, ResultsFile))
		if err != nil {
			return "", err
		}
		return r.Summary(filepath.ToSlash(link)), nil
	}}}
}
