package baseline

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
)

// envFloorUpdate turns TestRegenerateFloors on (make bench-floor).
const envFloorUpdate = "DLOCK_FLOOR_UPDATE"

// FloorsFile is where TestRegenerateFloors writes, relative to this
// package's directory; docs/benchmarks.md's floor table is rendered from
// it (benchreport.FloorBlocks).
const floorsFile = "../../../../docs/floors.json"

// floorRuns is how many times TestRegenerateFloors measures each backend.
const floorRuns = 3

// TestRegenerateFloors measures the floor of dlock's messages against the
// baseline's (see floorSlice) on Redis, PostgreSQL in both modes and
// etcd, floorRuns times over, and writes docs/floors.json. It is skipped
// unless DLOCK_FLOOR_UPDATE=1 (make bench-floor, which then renders the
// table).
func TestRegenerateFloors(t *testing.T) {
	if os.Getenv(envFloorUpdate) != "1" {
		t.Skipf("set %s=1 to measure the floors and write %s", envFloorUpdate, filepath.Base(floorsFile))
	}
	redis, etcd := testserver.Redis(t), testserver.Etcd(t)
	pg := testserver.Postgres(t).NewDatabase(t)
	f := &Floors{Measured: time.Now().UTC().Format("2006-01-02"), Machine: Machine(), SecondsPerSide: floorSlice.Seconds()}
	for range floorRuns {
		f.Rows = append(f.Rows, redisFloor(t, redis)...)
		f.Rows = append(f.Rows, postgresFloor(t, pg, pglock.Advisory)...)
		f.Rows = append(f.Rows, postgresFloor(t, pg, pglock.Lease)...)
		f.Rows = append(f.Rows, etcdFloor(t, etcd)...)
	}
	if err := WriteFloors(floorsFile, f); err != nil {
		t.Fatal(err)
	}
}
