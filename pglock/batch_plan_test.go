package pglock_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5"
)

// TestBatchStatementsPlannedPerCall: the lease mode's batched refresh and
// release are planned for each call's arrays, never as a cached prepared
// statement (unlike the few items of coalesced calls, coalescedMark). After five executions Postgres may switch a prepared
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
	rows, err := pool.Query(c, `SELECT statement FROM pg_prepared_statements WHERE statement LIKE '%unnest($1%' AND statement NOT LIKE '-- coalesced%'`, pgx.QueryExecModeSimpleProtocol)
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

// TestBatchStatementsReadTheTableOnce: a batch statement reads the lease
// table once at most, whichever plan Postgres picks for it (a scan of
// the whole table, or an index look-up per item). Each is run under
// EXPLAIN ANALYZE with 1,000 of a table's 20,000 leases, and the rows
// that its scans of the table produced or filtered out are summed. An
// earlier refresh joined its own result and then the table back to its
// items, and hashed the whole table twice for each batch: with 100,000
// leases, 95–160 ms for a batch of 1,000 against 6–9 ms now, and 100,000
// leases at TTL 6 s could not be refreshed in time.
func TestBatchStatementsReadTheTableOnce(t *testing.T) {
	d := newDB(t)
	drv, err := pglock.Config{}.Driver(d.pool)
	if err != nil {
		t.Fatal(err)
	}
	defer drv.Close()
	const n, table = 1000, 20000
	d.exec(t, `INSERT INTO dlock_leases (name, token, owner, fence, expires_at)
		SELECT 'once/' || g, 'token-' || g, 't', g, clock_timestamp() + interval '1 hour' FROM generate_series(1, $1::int) g`, table)
	d.exec(t, `ANALYZE dlock_leases`)
	names, tokens, micros := make([]string, n), make([]string, n), make([]int64, n)
	for i := range n {
		names[i], tokens[i], micros[i] = fmt.Sprintf("once/%d", i+1), fmt.Sprintf("token-%d", i+1), time.Hour.Microseconds()
	}
	refresh, release, channel := pglock.BatchStatements(drv)
	for _, s := range []struct {
		what string
		sql  string
		args []any
	}{
		{"refresh", refresh, []any{names, tokens, micros}},
		{"release", release, []any{names, tokens, channel}},
	} {
		var plan []map[string]any
		args := append([]any{pgx.QueryExecModeExec}, s.args...)
		if err := d.admin.QueryRow(ctx(t), "EXPLAIN (ANALYZE, FORMAT JSON) "+s.sql, args...).Scan(&plan); err != nil {
			t.Fatalf("%s: %v", s.what, err)
		}
		read := tableRows(plan[0]["Plan"].(map[string]any), "dlock_leases")
		t.Logf("batch %s of %d leases: %.0f rows of the table read", s.what, n, read)
		if read > table+n {
			t.Errorf("batch %s of %d of the table's %d leases read %.0f of its rows: more than one pass", s.what, n, table, read)
		}
	}
}

// tableRows sums, over a plan node and its children, the rows that scans
// of relation produced over all their loops, and those they filtered out.
func tableRows(node map[string]any, relation string) float64 {
	num := func(k string) float64 { v, _ := node[k].(float64); return v }
	var total float64
	if node["Relation Name"] == relation && strings.HasSuffix(node["Node Type"].(string), "Scan") {
		total = num("Actual Rows")*max(num("Actual Loops"), 1) + num("Rows Removed by Filter")
	}
	children, _ := node["Plans"].([]any)
	for _, c := range children {
		total += tableRows(c.(map[string]any), relation)
	}
	return total
}
