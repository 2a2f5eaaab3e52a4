package baseline

import (
	"encoding/json"
	"fmt"
	"os"
)

// Floors is what one uncontended cycle's messages cost the server with no
// client code of either side: the messages a TryAcquire+Release of
// dlock's and a cycle of the baseline's send, recorded and then sent
// again as they are, from 1 and 16 goroutines each on a connection of its
// own, in alternating slices (the floor tests of this package, `make
// bench-floor`). With one goroutine dlock sends a message a call, as the
// baseline does, so the ratio bounds what dlock's client could reach
// against the baseline with these messages.
type Floors struct {
	// Measured is the UTC day of the run; Machine where it ran.
	Measured string `json:"measured"`
	Machine  string `json:"machine"`
	// SecondsPerSide is each side's time per slice.
	SecondsPerSide float64 `json:"seconds_per_side"`
	// Rows are every pair of slices measured, in order.
	Rows []FloorRow `json:"rows"`
}

// FloorRow is one pair of slices: each side's messages sent for
// SecondsPerSide from Goroutines goroutines.
type FloorRow struct {
	// Backend is redis, postgres-advisory, postgres-lease or etcd.
	Backend    string `json:"backend"`
	Goroutines int    `json:"goroutines"`
	// Dlock and Baseline are the cycles a second of each side's messages.
	Dlock    float64 `json:"dlock_per_sec"`
	Baseline float64 `json:"baseline_per_sec"`
}

// Ratio is dlock's messages' rate over the baseline's.
func (r FloorRow) Ratio() float64 { return r.Dlock / r.Baseline }

// ReadFloors reads Floors written by WriteFloors.
func ReadFloors(path string) (*Floors, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f Floors
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &f, nil
}

// WriteFloors writes f to path, indented, for review in a diff.
func WriteFloors(path string, f *Floors) error {
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
