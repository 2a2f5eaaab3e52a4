package mysqllock_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestLeaseHandOffFloor measures what lease mode's queued hand-off could
// do at best on this server: 16 connections take turns on one row as the
// queued waiters do (a wait for a wake key and the row's UPDATE in one
// message, a release of the row and the key in another, 1 ms between
// turns), with the statements reduced to their bare form (no deadline
// guard, no hand-off mark, no key check) and no client library code. It
// logs the critical sections a second and the wait's median and p99.
// A measurement: run with DLOCK_STATEMENT_FLOOR=1; it fails only when a
// statement fails or a turn is not granted.
func TestLeaseHandOffFloor(t *testing.T) {
	if os.Getenv("DLOCK_STATEMENT_FLOOR") != "1" {
		t.Skip("a measurement: set DLOCK_STATEMENT_FLOOR=1 to run it")
	}
	d := newDB(t)
	pool := openSQL(t, d.srv.DSN(d.name)+"?interpolateParams=true&multiStatements=true")
	pool.SetMaxOpenConns(32)
	c := ctx(t)
	if _, err := pool.ExecContext(c, `CREATE TABLE floor_rows (name VARCHAR(64) PRIMARY KEY, token VARCHAR(64) NULL,
		fence BIGINT NOT NULL, expires_at DATETIME(6) NOT NULL) ENGINE=InnoDB`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.ExecContext(c, `INSERT INTO floor_rows VALUES ('n', NULL, 0, UTC_TIMESTAMP(6))`); err != nil {
		t.Fatal(err)
	}
	const (
		take = `DO GET_LOCK('floor-key', 60);
UPDATE floor_rows SET token = ?, fence = fence + 1, expires_at = UTC_TIMESTAMP(6) + INTERVAL 1 SECOND
	WHERE name = 'n' AND (token IS NULL OR expires_at <= UTC_TIMESTAMP(6));
SELECT ROW_COUNT(), fence FROM floor_rows WHERE name = 'n'`
		release = `UPDATE floor_rows SET token = NULL, expires_at = UTC_TIMESTAMP(6) WHERE name = 'n' AND token = ?;
DO RELEASE_LOCK('floor-key')`
		workers, each = 16, 3 * time.Second
	)
	for round := range 3 {
		var (
			mu    sync.Mutex
			waits []time.Duration
			wg    sync.WaitGroup
		)
		stop := time.Now().Add(each)
		for w := range workers {
			wg.Go(func() {
				if err := floorTurns(c, pool, fmt.Sprint("worker-", w), take, release, stop, func(wait time.Duration) {
					mu.Lock()
					waits = append(waits, wait)
					mu.Unlock()
				}); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		if len(waits) == 0 {
			t.Fatal("no turn was granted")
		}
		slices.Sort(waits)
		t.Logf("round %d: %.0f critical sections/s, wait p50 %s, p99 %s", round+1,
			float64(len(waits))/each.Seconds(), waits[len(waits)/2].Round(10*time.Microsecond),
			waits[len(waits)*99/100].Round(10*time.Microsecond))
	}
}

// floorTurns takes turns for token on a connection of its own until
// stop, reporting each wait to took.
func floorTurns(c context.Context, pool *sql.DB, token, take, release string, stop time.Time, took func(time.Duration)) error {
	conn, err := pool.Conn(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	for time.Now().Before(stop) {
		start := time.Now()
		var granted, fence int64
		if err := conn.QueryRowContext(c, take, token).Scan(&granted, &fence); err != nil {
			return err
		}
		if granted != 1 {
			return fmt.Errorf("%s: the turn was not granted (fence %d)", token, fence)
		}
		took(time.Since(start))
		if _, err := conn.ExecContext(c, release, token); err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}
