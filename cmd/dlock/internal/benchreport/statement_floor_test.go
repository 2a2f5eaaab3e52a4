package benchreport_test

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/baseline"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/mysqllock"
)

// envStatementFloor turns on TestMySQLStatementFloor.
const envStatementFloor = "DLOCK_STATEMENT_FLOOR"

// TestMySQLStatementFloor measures what a MySQL cycle's statements cost
// the server with no client code of either side: it records, in
// MariaDB's general log, the messages one uncontended cycle of each side
// sends (dlock and the hand-written baseline, in each mode), then sends
// them again as they are from 1 and 16 goroutines, each on a connection
// of its own with its own name and key, for 2 s a side, twice, and logs
// dlock's rate over the baseline's. That ratio bounds what dlock's
// client could reach against this baseline. It is skipped unless
// DLOCK_STATEMENT_FLOOR=1.
func TestMySQLStatementFloor(t *testing.T) {
	if os.Getenv(envStatementFloor) != "1" {
		t.Skipf("set %s=1 to measure MySQL's statement floor", envStatementFloor)
	}
	my := testserver.MariaDB(t)
	db := my.NewDatabase(t)
	admin, err := sql.Open("mysql", my.DSN(db)+"?multiStatements=true")
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	admin.SetMaxOpenConns(40)
	admin.SetMaxIdleConns(40)
	for _, mode := range []string{"get_lock", "lease"} {
		tg, err := baseline.Open(context.Background(), my.URL(db)+"?mode="+mode, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		dlockName, baseName := "floor-dlock-"+mode, "floor-base-"+mode
		dlockMsgs := recordCycle(t, admin, tg.Dlock.Cycle, dlockName)
		baseMsgs := recordCycle(t, admin, tg.Base.Cycle, baseName)
		tg.Close()
		for range 2 {
			for _, g := range []int{1, 16} {
				d := replay(t, admin, dlockMsgs, dlockName, g)
				b := replay(t, admin, baseMsgs, baseName, g)
				t.Logf("%s, %d goroutines: dlock's statements %.0f cycles/s, the baseline's %.0f: %.2f×", mode, g, d, b, d/b)
			}
		}
	}
}

// lockKey matches mysqllock's GET_LOCK names (Key, and lease mode's wake
// keys).
var lockKey = regexp.MustCompile(`dlock:(w:)?[0-9a-f]{40}`)

// recordCycle runs cycle on name three times, then once more with the
// general log on, and returns the messages of that cycle that name the
// lock (its name, its key or the baseline's key), in order.
func recordCycle(t *testing.T, admin *sql.DB, cycle func(context.Context, string) error, name string) []string {
	t.Helper()
	ctx := context.Background()
	for range 3 { // the name's row made, the pools warm
		if err := cycle(ctx, name); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []string{"TRUNCATE mysql.general_log", "SET GLOBAL log_output = 'TABLE'", "SET GLOBAL general_log = 1"} {
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	err := cycle(ctx, name)
	if _, lerr := admin.Exec("SET GLOBAL general_log = 0"); err == nil {
		err = lerr
	}
	if err != nil {
		t.Fatal(err)
	}
	rows, err := admin.Query(`SELECT CONVERT(argument USING utf8mb4) FROM mysql.general_log
		WHERE command_type IN ('Query', 'Execute') ORDER BY event_time`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var all []string
	for rows.Next() {
		var a string
		if err := rows.Scan(&a); err != nil {
			t.Fatal(err)
		}
		all = append(all, a)
	}
	keys := []string{mysqllock.Key("dlock-bench-baseline:" + name)}
	for _, a := range all {
		if strings.Contains(a, name) {
			keys = append(keys, lockKey.FindAllString(a, -1)...)
		}
	}
	var msgs []string
	for _, a := range all {
		if strings.Contains(a, name) || slicesContainsIn(keys, a) {
			msgs = append(msgs, a)
			t.Logf("recorded: %s", a)
		}
	}
	if len(msgs) == 0 {
		t.Fatalf("no message of a cycle on %q in the general log", name)
	}
	return msgs
}

// slicesContainsIn reports whether any of keys is in s.
func slicesContainsIn(keys []string, s string) bool {
	for _, k := range keys {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

// replay sends msgs in a loop from g goroutines for 2 s, each on its own
// connection with name and the keys made its own, and returns the cycles
// a second.
func replay(t *testing.T, admin *sql.DB, msgs []string, name string, g int) float64 {
	t.Helper()
	ctx := context.Background()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int
	)
	start := time.Now()
	for i := range g {
		mine := make([]string, len(msgs))
		for j, m := range msgs {
			m = strings.ReplaceAll(m, name, fmt.Sprintf("%s/%02d", name, i))
			mine[j] = lockKey.ReplaceAllStringFunc(m, func(k string) string { return fmt.Sprintf("%s%04d", k[:len(k)-4], i) })
		}
		wg.Go(func() {
			conn, err := admin.Conn(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			n := 0
			for time.Since(start) < 2*time.Second {
				for _, m := range mine {
					if err := drain(conn.QueryContext(ctx, m)); err != nil {
						t.Errorf("%s: %v", m, err)
						return
					}
				}
				n++
			}
			mu.Lock()
			total += n
			mu.Unlock()
		})
	}
	wg.Wait()
	return float64(total) / time.Since(start).Seconds()
}

// drain reads every result of a message.
func drain(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	defer rows.Close()
	for {
		for rows.Next() {
		}
		if !rows.NextResultSet() {
			return rows.Err()
		}
	}
}
