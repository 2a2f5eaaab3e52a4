package failover

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"time"

	"github.com/dlockdev/dlock/internal/benchwork"
)

// Result is what one run measured. Durations are milliseconds.
type Result struct {
	Backend        string  `json:"backend"`
	Replicas       int     `json:"replicas"`
	Killed         int     `json:"killed"`
	LeaseKeyFile   bool    `json:"lease_key_file"`
	RollingRestart bool    `json:"rolling_restart"`
	Clients        int     `json:"clients"`
	HeldTTLMs      int64   `json:"held_ttl_ms"`
	LoadRate       int     `json:"load_rate"`
	LoadNames      int     `json:"load_names"`
	LoadTTLMs      int64   `json:"load_ttl_ms"`
	Seconds        float64 `json:"seconds"`

	// LeasesLost counts the held-lease clients that lost their lease
	// (force-released ones left out), LostBy how each learned it.
	LeasesLost int            `json:"leases_lost"`
	LostBy     map[string]int `json:"lost_by,omitempty"`
	// NotSettled is the clients still away when a step's Settle bound ran out.
	NotSettled int `json:"not_settled"`
	// HolderErrors counts answers to a held-lease client that were neither
	// its lease nor its loss (429, 503, ...).
	HolderErrors int `json:"holder_errors"`

	// DoubleGrants is FenceInversions plus Overlaps (see Ledger), over
	// Grants grants of the load.
	DoubleGrants    int `json:"double_grants"`
	FenceInversions int `json:"fence_inversions"`
	Overlaps        int `json:"overlaps"`
	Grants          int `json:"grants"`

	// Breaks counts the streams that broke without an end event; Back of
	// them said "held" again, after BackP50/P99/Max.
	Breaks    int     `json:"breaks"`
	Back      int     `json:"back"`
	BackP50Ms float64 `json:"back_p50_ms"`
	BackP99Ms float64 `json:"back_p99_ms"`
	BackMaxMs float64 `json:"back_max_ms"`

	// The load: granted acquires and their latency (the wait included),
	// the ones not granted, and the cycles per second it reached.
	Acquires           int            `json:"acquires"`
	AcquireP50Ms       float64        `json:"acquire_p50_ms"`
	AcquireP99Ms       float64        `json:"acquire_p99_ms"`
	Busy               int            `json:"busy"`
	AcquireUnreachable int            `json:"acquire_unreachable"`
	AcquireFailed      map[string]int `json:"acquire_failed,omitempty"`
	ReleaseFailed      int            `json:"release_failed"`
	CyclesPerSecond    float64        `json:"cycles_per_second"`

	// ForceReleased leases were force-released on purpose during the
	// failover; PushHeard of their clients heard of it, after
	// PushP50/P99. ForceErrors force-releases were refused.
	ForceReleased int     `json:"force_released"`
	ForceErrors   int     `json:"force_errors"`
	PushHeard     int     `json:"push_heard"`
	PushP50Ms     float64 `json:"push_p50_ms"`
	PushP99Ms     float64 `json:"push_p99_ms"`
}

// Report is the results file: when and where the runs were measured.
type Report struct {
	Measured string   `json:"measured"` // a date, YYYY-MM-DD
	Machine  string   `json:"machine"`
	Runs     []Result `json:"runs"`
}

// ReadReport reads a results file.
func ReadReport(path string) (*Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("failover: %s: %w", path, err)
	}
	return &r, nil
}

// Write writes the results file, indented, with a final newline.
func (r *Report) Write(path string) error {
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o644)
}

// ms is d in milliseconds, to a tenth.
func ms(d time.Duration) float64 {
	return math.Round(float64(d)/float64(time.Millisecond)*10) / 10
}

// percentiles are p50, p99 and the maximum of d, in milliseconds.
func percentiles(d []time.Duration) (p50, p99, maxMs float64) {
	return ms(benchwork.Percentile(d, 50)), ms(benchwork.Percentile(d, 99)), ms(benchwork.Percentile(d, 100))
}
