package pglock_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// TestBatchStatementsPlannedPerCall: the lease mode's batched refresh and
// release are planned for each call's arrays, never as a cached prepared
// statement. After five executions Postgres may switch a prepared
// statement to its generic plan, which does not know the arrays' length:
// for 1,000-lease batches it ran 6–10 times slower (≈ 200 ms instead of
// 22 ms a batch on this machine), and 10,000 leases at TTL 2 s could no
// longer be refreshed in time (6,586 lost in the S9 fault scenario).
func TestBatchStatementsPlannedPerCall(t *testing.T) {
	d := newDB(t)
	// One connection: the batches and the look-up below share it.
	pool := newPool(t, d.url+"&pool_max_conns=1")
	drv, err := pglock.Config{}.Driver(pool)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	c := ctx(t)
	var refresh []driver.RefreshItem
	var release []driver.ReleaseItem
	for i := range 20 {
		req := driver.Request{Name: fmt.Sprintf("plan/%d", i), Token: fmt.Sprintf("token-%d", i), Owner: "t", TTL: time.Minute}
		if g, err := drv.TryAcquire(c, req); err != nil || !g.Acquired {
			t.Fatalf("TryAcquire %s = %+v, %v", req.Name, g, err)
		}
		refresh = append(refresh, driver.RefreshItem{Name: req.Name, Token: req.Token, TTL: time.Minute})
		release = append(release, driver.ReleaseItem{Name: req.Name, Token: req.Token})
	}
	for range 7 { // past the plan cache's five custom plans
		if _, err := drv.(driver.BatchRefresher).RefreshBatch(c, refresh); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := drv.(driver.BatchReleaser).ReleaseBatch(c, release); err != nil {
		t.Fatal(err)
	}
	var prepared []string
	rows, err := pool.Query(c, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%unnest(%'`, pgx.QueryExecModeSimpleProtocol)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		prepared = append(prepared, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if len(prepared) > 0 {
		t.Errorf("%d batch statements are cached prepared statements (a generic plan may replace their custom plans): %q", len(prepared), prepared)
	}
}
