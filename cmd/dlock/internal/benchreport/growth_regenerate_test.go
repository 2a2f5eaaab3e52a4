package benchreport_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/docblock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// envGrowth set to 1 runs TestRegenerateGrowth (make bench-growth).
const envGrowth = "DLOCK_GROWTH_UPDATE"

// Lease TTL and hold of the growth run: the watchdog refreshes every
// TTL/3, so each lease is refreshed about three times while held.
// The release after the hold is timed too, and cut short at
// growthRelease; growthBound bounds one run from its first acquire.
const (
	growthTTL     = 6 * time.Second
	growthHold    = 6 * time.Second
	growthRelease = time.Minute
	growthBound   = 10 * time.Minute
)

// TestRegenerateGrowth starts Redis, a Redis Cluster of 3 primaries,
// PostgreSQL (lease mode) and etcd, holds benchreport.GrowthLeases
// leases on one Locker of each, writes the reports to docs/growth.json
// and renders from it the growth table of docs/benchmarks.md and
// docs/growth.svg. It is skipped unless DLOCK_GROWTH_UPDATE=1: it takes
// minutes and its figures are the machine's.
func TestRegenerateGrowth(t *testing.T) {
	if os.Getenv(envGrowth) != "1" {
		t.Skipf("set %s=1 (or run make bench-growth) to measure and rewrite the growth figures", envGrowth)
	}
	g := &benchreport.Growth{Measured: time.Now().UTC().Format("2006-01-02"), Machine: baseline.Machine()}
	for _, u := range growthTargets(t) {
		for _, n := range benchreport.GrowthLeases {
			r := holdGrowth(t, u, n)
			t.Logf("%s, %d leases: acquire %.1fs, %s round trips/tick, %.0f B/lease, %d lost (%s), release %.1fs (cut %v) %s",
				r.Backend, n, r.AcquireSeconds, fmtOpt(r.RoundTripsPerTick), r.HeapBytesPerLease, r.Lost, r.FirstLost,
				r.ReleaseSeconds, r.ReleaseCut, r.Error)
			g.Rows = append(g.Rows, r)
		}
	}
	if err := benchreport.WriteGrowth(filepath.Join(root, benchreport.GrowthResultsFile), g); err != nil {
		t.Fatal(err)
	}
	if err := docblock.Update(benchreport.GrowthBlocks(root, g)); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s and rendered %s and %s from it", benchreport.GrowthResultsFile, benchreport.DocFile, benchreport.GrowthChartFile)
}

// growthTargets starts the growth run's servers, in the table's order;
// each target's backend is its name in the table.
func growthTargets(t *testing.T) []target {
	byName := map[string]target{}
	for _, u := range serverURLs(t, func(name string) bool { return name == "redis" || name == "postgres lease" || name == "etcd" }) {
		byName[u.name] = u
	}
	cluster := target{name: "redis cluster", backend: "redis-cluster", url: testserver.RedisCluster(t, 3).URL()}
	return []target{byName["redis"], cluster, byName["postgres lease"], byName["etcd"]}
}

// holdGrowth holds n leases on u, on a Target of its own; a run that
// fails is a row with its error, not the end of the others.
func holdGrowth(t *testing.T, u target, n int) baseline.LeaseReport {
	ctx, cancel := context.WithTimeout(context.Background(), growthBound)
	defer cancel()
	tg, err := baseline.Open(ctx, u.url, growthTTL)
	if err != nil {
		t.Fatalf("%s: %v", u.name, err)
	}
	defer tg.Close()
	r, err := baseline.HoldLeasesWithin(ctx, tg, n, growthHold, growthTTL, fmt.Sprintf("growth-%d/", n), growthRelease)
	if err != nil {
		r = baseline.LeaseReport{Leases: n, TTLSeconds: growthTTL.Seconds(), Error: firstLine(err)}
	}
	r.Backend = u.backend
	return r
}

func fmtOpt(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("%.1f", *v)
}
