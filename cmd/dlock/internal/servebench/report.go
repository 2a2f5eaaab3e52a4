package servebench

import (
	"errors"
	"fmt"
	"time"
)

// Report is the outcome of Run.
type Report struct {
	// Backend is the redacted URL, or the Locker's backend name.
	Backend string `json:"backend"`
	// Goroutines is the workers of each workload; Duration how long each
	// workload ran on each side (or Ops, its operations, when set);
	// SSEStreams the streams asked for.
	Goroutines int           `json:"goroutines"`
	Duration   time.Duration `json:"duration_ns"`
	Ops        int           `json:"ops,omitempty"`
	SSEStreams int           `json:"sse_streams"`
	// Uncontended and Contended compare the HTTP API with the library.
	Uncontended Compare `json:"uncontended"`
	Contended   Compare `json:"contended"`
	// Streams is the events-stream phase (zero when skipped).
	Streams Streams `json:"streams"`
}

// Compare is one workload over HTTP and on the library.
type Compare struct {
	HTTP    Workload `json:"http"`
	Library Workload `json:"library"`
	// Ratio is HTTP's rate over the library's (1: no cost; 0.1: a tenth).
	Ratio float64 `json:"ratio"`
	// Overhead is how much longer one cycle takes over HTTP: the
	// difference of the p50 cycles (uncontended), or of the time per
	// critical section, 1/rate (contended: the lock serialises them, so a
	// wait adds up every holder's cycle).
	Overhead time.Duration `json:"overhead_ns"`
}

// Workload is one side of one workload.
type Workload struct {
	// Ops is the successful cycles (critical sections, contended);
	// Failed the failed ones, and Err the first failure.
	Ops    int    `json:"ops"`
	Failed int    `json:"failed"`
	Err    string `json:"error,omitempty"`
	// Elapsed is the run's wall time; PerSecond is Ops per second.
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"per_second"`
	// P50 and P99 are of a whole acquire+release cycle (uncontended) or
	// of the wait for the lock (contended).
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// HandoffP50 and HandoffP99 (contended) are from a release to the
	// next grant; Violations counts grants while another held the lock
	// (must be 0).
	HandoffP50 time.Duration `json:"handoff_p50_ns,omitempty"`
	HandoffP99 time.Duration `json:"handoff_p99_ns,omitempty"`
	Violations int           `json:"violations,omitempty"`
	// CPUPerOp is this process's CPU time (user and system, every
	// goroutine: the HTTP clients', the server's, the driver's) over the
	// run, per op; 0 where the platform does not say. Unlike the rates, it
	// hardly depends on what else the machine runs.
	CPUPerOp time.Duration `json:"cpu_per_op_ns,omitempty"`
}

// Streams is the events-stream phase.
type Streams struct {
	// Streams is the leases held, each with its stream open.
	Streams int `json:"streams"`
	// Acquire is how long taking every lease took; Open how long opening
	// every stream took, until each had its "held" event.
	Acquire time.Duration `json:"acquire_ns"`
	Open    time.Duration `json:"open_ns"`
	// Released and Lost are the streams whose lease was released (DELETE,
	// event "released") and force-released by an admin (event "lost").
	Released Delivery `json:"released"`
	Lost     Delivery `json:"lost"`
	// All is from the first release request to the last event.
	All time.Duration `json:"all_ns"`
	// Before is the process with every lease held and no stream open;
	// WithAll with every stream open too.
	Before  Process `json:"before"`
	WithAll Process `json:"with_all"`
}

// Delivery is how fast one kind of event reached its streams.
type Delivery struct {
	// Event is the SSE event expected; Streams how many expected it,
	// Delivered how many got it, Wrong how many got another end event,
	// Ended how many the server then closed.
	Event     string `json:"event"`
	Streams   int    `json:"streams"`
	Delivered int    `json:"delivered"`
	Wrong     int    `json:"wrong,omitempty"`
	Ended     int    `json:"ended"`
	// Reasons counts the lost events by reason ("force-released" when the
	// backend pushed the eviction; otherwise the next refresh found the
	// lock gone).
	Reasons map[string]int `json:"reasons,omitempty"`
	// P50, P99 and Max are from each release request's start to its
	// stream's event.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	Max time.Duration `json:"max_ns"`
}

// Process is the process's goroutines and heap at one moment. The server
// and its clients share the process, so Goroutines is split by stack:
// Server (HTTP server connections, package serve, the library's lease
// keeping) and Client (client connections and the stream readers).
type Process struct {
	Goroutines int    `json:"goroutines"`
	Server     int    `json:"server_goroutines"`
	Client     int    `json:"client_goroutines"`
	HeapInuse  uint64 `json:"heap_inuse_bytes"`
}

// ok reports whether every stream got the event it expected and was
// closed after it.
func (d Delivery) ok() bool {
	return d.Delivered == d.Streams && d.Ended == d.Streams
}

// err is the workload comparison's first failure.
func (c Compare) err() error {
	var errs []error
	for _, w := range []struct {
		side string
		w    Workload
	}{{"http", c.HTTP}, {"library", c.Library}} {
		if w.w.Err != "" {
			errs = append(errs, fmt.Errorf("servebench: %s: %d failed, first: %s", w.side, w.w.Failed, w.w.Err))
		}
		if w.w.Violations > 0 {
			errs = append(errs, fmt.Errorf("servebench: %s: %d mutual-exclusion violations", w.side, w.w.Violations))
		}
	}
	return errors.Join(errs...)
}

// compare builds a Compare; contended picks the Overhead definition.
func compare(h, lib Workload, contended bool) Compare {
	c := Compare{HTTP: h, Library: lib}
	if lib.PerSecond > 0 {
		c.Ratio = h.PerSecond / lib.PerSecond
	}
	switch {
	case !contended:
		c.Overhead = h.P50 - lib.P50
	case h.PerSecond > 0 && lib.PerSecond > 0:
		c.Overhead = time.Duration(float64(time.Second)/h.PerSecond - float64(time.Second)/lib.PerSecond)
	}
	return c
}
