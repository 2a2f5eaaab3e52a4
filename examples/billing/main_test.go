package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/examples/internal/exampletest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

const (
	subs  = 10
	ttl   = time.Second
	pause = 5 * time.Second // longer than the TTL
)

// runs is how many times each version runs; BILLING_RUNS overrides it.
func runs() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("BILLING_RUNS"), &n); err == nil && n > 0 {
		return n
	}
	return 3
}

type world struct {
	bin string
	env []string
	db  *pgxpool.Pool
}

func newWorld(t *testing.T) world {
	bin := exampletest.Build(t, ".")
	dbURL := testserver.Postgres(t).NewDatabase(t)
	redisURL := testserver.Redis(t).URL()
	env := []string{"DATABASE_URL=" + dbURL, "REDIS_URL=" + redisURL, "DLOCK_URL=" + redisURL}
	if code, out := exampletest.Run(t, "setup", bin, env, time.Minute, "setup", "-subs", fmt.Sprint(subs)); code != 0 {
		t.Fatalf("setup exited %d: %q", code, out)
	}
	db, err := pgxpool.New(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return world{bin: bin, env: env, db: db}
}

// twoHosts runs the nightly job on host A, which pauses past its lock's
// TTL while claiming its 4th subscription, and starts host B once A's
// lock has expired. It returns the number of subscriptions charged and
// of those charged more than once.
func (w world) twoHosts(t *testing.T, version, period string) (charged, doubles int, outA []string) {
	args := func(host string) []string {
		return []string{version, "-host", host, "-period", period, "-ttl", ttl.String()}
	}
	a := exampletest.Start(t, "A", w.bin, w.env, append(args("A"), "-pause", pause.String(), "-pause-after", "4")...)
	a.Expect("pausing", time.Minute)
	time.Sleep(ttl + 500*time.Millisecond)
	if code, out := exampletest.Run(t, "B", w.bin, w.env, time.Minute, args("B")...); code != 0 {
		t.Fatalf("B exited %d: %q", code, out)
	}
	code, outA := a.Wait(time.Minute)
	if code != 0 {
		t.Fatalf("A exited %d: %q", code, outA)
	}
	err := w.db.QueryRow(context.Background(), `SELECT count(*), count(*) FILTER (WHERE n > 1)
		FROM (SELECT sub_id, count(*) AS n FROM payments WHERE period = $1 GROUP BY sub_id) c`, period).Scan(&charged, &doubles)
	if err != nil {
		t.Fatal(err)
	}
	return charged, doubles, outA
}

// testNaiveDoubleCharges: the naive cron (SET NX EX, plain DEL) double
// charges once a host pauses past the TTL.
func testNaiveDoubleCharges(t *testing.T) {
	w := newWorld(t)
	total := 0
	for i := range runs() {
		period := fmt.Sprintf("2027-%02d", i+1)
		charged, doubles, _ := w.twoHosts(t, "naive", period)
		t.Logf("naive run %d: %d subscriptions charged, %d double-charged", i+1, charged, doubles)
		if doubles < 1 {
			t.Errorf("naive run %d: no double charge; the demonstration did not reproduce the bug", i+1)
		}
		total += doubles
	}
	t.Logf("naive: %d double charges over %d runs", total, runs())
}

// testFixedChargesOnce: lock + fence + idempotency key charge every
// subscription exactly once, although the lock expires mid-run.
func testFixedChargesOnce(t *testing.T) {
	w := newWorld(t)
	total := 0
	for i := range runs() {
		period := fmt.Sprintf("2027-%02d", i+1)
		charged, doubles, outA := w.twoHosts(t, "fixed", period)
		t.Logf("fixed run %d: %d subscriptions charged, %d double-charged", i+1, charged, doubles)
		if doubles != 0 || charged != subs {
			t.Errorf("fixed run %d: %d charged, %d double-charged; want %d and 0", i+1, charged, doubles, subs)
		}
		// Both layers must have acted: the fence stopped A, and the
		// idempotency key turned A's charge of the subscription it had
		// claimed before pausing into a replay of B's.
		if all := strings.Join(outA, "\n"); !strings.Contains(all, "fenced off") || !strings.Contains(all, "replayed 1") {
			t.Errorf("fixed run %d: host A's output lacks the fence rejection or the idempotent replay: %q", i+1, outA)
		}
		total += doubles
	}
	t.Logf("fixed: %d double charges over %d runs", total, runs())
}

func testReport(t *testing.T) {
	w := newWorld(t)
	_, err := w.db.Exec(context.Background(), `INSERT INTO payments (sub_id, period, host) VALUES (1, 'p', 'A'), (1, 'p', 'B'), (2, 'p', 'A')`)
	if err != nil {
		t.Fatal(err)
	}
	code, out := exampletest.Run(t, "report", w.bin, w.env, time.Minute, "report", "-period", "p")
	if code != 0 || len(out) != 1 || !strings.Contains(out[0], "2 subscriptions charged, 3 payments, 1 double-charged") {
		t.Fatalf("report exited %d: %q", code, out)
	}
}

// TestBilling runs every test as a subtest, so that they share one PostgreSQL
// server (testserver.Postgres keeps it while a user is running).
func TestBilling(t *testing.T) {
	testserver.Postgres(t)
	t.Run("NaiveDoubleCharges", testNaiveDoubleCharges)
	t.Run("FixedChargesOnce", testFixedChargesOnce)
	t.Run("Report", testReport)
}
