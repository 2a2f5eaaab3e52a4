package benchreport

import (
	"encoding/json"
	"fmt"
	"os"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/servebench"
)

// Results is everything `make bench-readme` measured, kept in the
// committed file docs/benchmarks.json: every figure of the
// benchmark summary, docs/benchmarks.md and docs/benchmarks.svg is
// rendered from it (Blocks).
type Results struct {
	// Measured is the UTC day of the run; Machine where it ran.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	// SecondsPerSide is each side's measured time per workload (each way
	// of waiting, contended), in Rounds alternating slices.
	SecondsPerSide float64 `json:"seconds_per_side"`
	Rounds         int     `json:"rounds"`
	// Comparisons are `dlock bench --compare` on every backend: when it
	// ran several times, for each backend and workload the run whose
	// ratio is the median (Medians).
	Comparisons []baseline.Comparison `json:"comparisons"`
	// Figures are, when every backend was compared several times (one
	// after another over all of them), each run's figures that decide the
	// targets (Verdicts).
	Figures [][]Figure `json:"figures,omitempty"`
	// Leases are `dlock bench --leases` on every backend that holds them.
	Leases []baseline.LeaseReport `json:"leases"`
	// Serve are `dlock bench --serve` runs, one per backend.
	Serve []servebench.Report `json:"serve"`
	// Elections and Semaphores are `dlock bench --election` and
	// `--semaphore` runs, one per backend.
	Elections  []Election  `json:"elections"`
	Semaphores []Semaphore `json:"semaphores"`
}

// Election is what `dlock bench --election` measured: the time from the
// SIGKILL of a leader to the return of the Campaign that was waiting to
// succeed it, once per round. The leader's lease had between 2/3 of its
// TTL and all of it left at the kill (the watchdog refreshes every
// TTL/3); LeftMs is what the backend reported just before the kill, and
// PastExpiryP50Ms the p50 of each round's failover minus it: how late
// after the lease's end the new term began.
type Election struct {
	Backend         string    `json:"backend"`
	Workload        string    `json:"workload"`
	Rounds          int       `json:"rounds"`
	TTLSeconds      float64   `json:"ttl_seconds"`
	FailoverMs      []float64 `json:"failover_ms"`
	LeftMs          []float64 `json:"left_ms,omitempty"`
	MinMs           float64   `json:"min_ms"`
	P50Ms           float64   `json:"p50_ms"`
	MaxMs           float64   `json:"max_ms"`
	P50OverTTL      float64   `json:"p50_over_ttl"`
	PastExpiryP50Ms *float64  `json:"past_expiry_p50_ms,omitempty"`
}

// Semaphore is what `dlock bench --semaphore N` measured.
type Semaphore struct {
	Backend    string  `json:"backend"`
	Workload   string  `json:"workload"`
	Permits    int     `json:"permits"`
	Goroutines int     `json:"goroutines"`
	HoldMs     float64 `json:"hold_ms"`
	Ops        int64   `json:"ops"`
	Seconds    float64 `json:"seconds"`
	OpsPerSec  float64 `json:"ops_per_sec"`
	WaitP50Ms  float64 `json:"wait_p50_ms"`
	WaitP99Ms  float64 `json:"wait_p99_ms"`
	MaxHolders int     `json:"max_holders"`
	Errors     int64   `json:"errors"`
	Violations int64   `json:"violations"`
}

// ReadResults reads a results file.
func ReadResults(path string) (*Results, error) { return readJSON[Results](path) }

// WriteResults writes r to path, indented, for review in a diff.
func WriteResults(path string, r *Results) error { return writeJSON(path, r) }

// readJSON reads a committed result file into a T.
func readJSON[T any](path string) (*T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &v, nil
}

// writeJSON writes v to path, indented, for review in a diff.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
