package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/docblock"
)

// envRender set to 1 makes TestPublishedSummaryCurrent rewrite the
// summary's block in docs/chaos.md from chaos/RESULTS.md (make chaos does,
// after a full run).
const envRender = "DLOCK_CHAOS_RENDER"

// TestPublishedSummaryCurrent: every figure of the fault-suite summary in
// docs/chaos.md is what the committed chaos/RESULTS.md renders now, and
// README.md carries no fault-suite block.
func TestPublishedSummaryCurrent(t *testing.T) {
	var also []string
	for _, f := range Unrendered {
		also = append(also, filepath.Join("..", f))
	}
	docblock.Verify(t, Blocks(".."), "chaos-", os.Getenv(envRender) == "1", "make chaos-render (or make chaos to run the suite anew)", also...)
}

// TestSummaryNamesEveryFailureAndExemption: a row that fails, an exempt
// row and a control that did not reproduce each appear by name; the
// totals count them.
func TestSummaryNamesEveryFailureAndExemption(t *testing.T) {
	r := fileResults{header: "dlock fault suite: full run, 2026-12-05", rows: []resultRow{
		{scenario: "S1 pause, fenced (stale writes accepted)", backend: "redis", expect: "0", trials: 20, verdict: "PASS"},
		{scenario: "S1 pause, unfenced control", backend: "redis", expect: "≥1 (control)", trials: 20, violations: 20, verdict: "PASS (reproduced)"},
		{scenario: "S6 crash control", backend: "postgres", expect: "≥1 (control)", trials: 20, verdict: "FAIL (blind: not reproduced)"},
		{scenario: "S7 reset", backend: "postgres (advisory)", expect: "0 (exemption stated)", trials: 20, unlin: 2, verdict: "EXEMPT 2 of 20"},
		{scenario: "S9 many", backend: "etcd", expect: "0", trials: 1, violations: 10000, verdict: "FAIL"},
	}}
	s := r.Summary("../chaos/RESULTS.md")
	for _, want := range []string{"From [chaos/RESULTS.md](../chaos/RESULTS.md) — full run", "5 rows, 81 trials", "**1 of 2 pass**", "**0 stale writes in 20 trials**", "**1 of 2 reproduced**",
		"S1 on redis 20/20", "Exempt: S7 reset on postgres (advisory): 2 of 20", "**Failed**: S6 crash control on postgres: FAIL (blind",
		"**Failed**: S9 many on etcd: FAIL, 10000 violations"} {
		if !strings.Contains(s, want) {
			t.Errorf("summary lacks %q:\n%s", want, s)
		}
	}
}
