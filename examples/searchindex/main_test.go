package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/examples/internal/exampletest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

type world struct {
	dbURL, lockURL string
	db             *pgxpool.Pool
}

func newWorld(t *testing.T, products int) world {
	ctx := context.Background()
	w := world{dbURL: testserver.Postgres(t).NewDatabase(t), lockURL: testserver.Redis(t).URL()}
	db, err := pgxpool.New(ctx, w.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	w.db = db
	if err := setup(ctx, db, products); err != nil {
		t.Fatal(err)
	}
	return w
}

// live returns the live index's row count and generation(s).
func (w world) live(t *testing.T) (rows int, gen int64) {
	t.Helper()
	err := w.db.QueryRow(context.Background(), `SELECT count(*), coalesce(max(generation), 0) FROM search_index`).Scan(&rows, &gen)
	if err != nil {
		t.Fatal(err)
	}
	return rows, gen
}

func (w world) leftovers(t *testing.T) int {
	var n int
	_ = w.db.QueryRow(context.Background(), `SELECT count(*) FROM pg_tables WHERE tablename LIKE 'idx\_tmp\_%'`).Scan(&n)
	return n
}

// testCrashMidRebuild: a rebuild killed (SIGKILL) mid-way leaves the live
// index as it was; its orphaned lock turns other rebuilds away until its
// TTL runs out; the next rebuild then completes and clears the leftover.
func testCrashMidRebuild(t *testing.T) {
	w := newWorld(t, 100)
	bin := exampletest.Build(t, ".")
	env := []string{"DATABASE_URL=" + w.dbURL, "DLOCK_URL=" + w.lockURL}
	if code, out := exampletest.Run(t, "first", bin, env, time.Minute, "rebuild"); code != 0 {
		t.Fatalf("first rebuild exited %d: %q", code, out)
	}
	rows1, gen1 := w.live(t)
	if rows1 != 100 {
		t.Fatalf("live index has %d rows after the first rebuild, want 100", rows1)
	}
	if _, err := w.db.Exec(context.Background(), `INSERT INTO products SELECT i, 'new ' || i FROM generate_series(101, 150) i`); err != nil {
		t.Fatal(err)
	}

	crash := exampletest.Start(t, "crash", bin, env, "rebuild", "-slow", "300ms", "-ttl", "8s")
	crash.Expect("building idx_tmp_", time.Minute)
	crash.Expect("building", time.Minute) // well into the build
	crash.Signal(syscall.SIGKILL)
	crash.Wait(time.Minute)
	if rows, gen := w.live(t); rows != rows1 || gen != gen1 {
		t.Fatalf("after the crash the live index has %d rows of generation %d, want %d of %d", rows, gen, rows1, gen1)
	}
	if w.leftovers(t) != 1 {
		t.Fatalf("want the crashed rebuild's temporary table left behind, found %d", w.leftovers(t))
	}

	if code, _ := exampletest.Run(t, "busy", bin, env, time.Minute, "rebuild"); code != exitHeld {
		t.Fatalf("rebuild while the crashed one's lock is live exited %d, want %d", code, exitHeld)
	}
	if code, out := exampletest.Run(t, "next", bin, env, time.Minute, "rebuild", "-wait", "30s"); code != 0 {
		t.Fatalf("next rebuild exited %d: %q", code, out)
	}
	rows, gen := w.live(t)
	if rows != 150 || gen <= gen1 {
		t.Fatalf("after the next rebuild: %d rows of generation %d, want 150 of a generation above %d", rows, gen, gen1)
	}
	if n := w.leftovers(t); n != 0 {
		t.Fatalf("%d temporary tables left after a clean rebuild", n)
	}
}

func (w world) rebuilder(t *testing.T, owner string) *rebuilder {
	l, err := dlock.Open(context.Background(), w.lockURL, dlock.WithTTL(3*time.Second), dlock.WithOwner(owner))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return &rebuilder{db: w.db, locker: l, slow: 100 * time.Millisecond, out: io.Discard}
}

type answer struct {
	Error   string  `json:"error"`
	Running running `json:"running"`
	Started running `json:"started"`
}

func post(t *testing.T, url string) (int, answer) {
	t.Helper()
	resp, err := http.Post(url+"/rebuild", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("decode %d answer: %v", resp.StatusCode, err)
	}
	return resp.StatusCode, a
}

// testAdminAPI: POST /rebuild answers 202 when it starts a rebuild and
// 409, naming the running rebuild's owner and start time, from any
// server of the fleet while one is running.
func testAdminAPI(t *testing.T) {
	w := newWorld(t, 200)
	r1, r2 := w.rebuilder(t, "admin-1"), w.rebuilder(t, "admin-2")
	s1 := httptest.NewServer(r1.handler(context.Background()))
	defer s1.Close()
	s2 := httptest.NewServer(r2.handler(context.Background()))
	defer s2.Close()

	code, a := post(t, s1.URL)
	if code != http.StatusAccepted || a.Started.Owner != "admin-1" || a.Started.StartedAt.IsZero() {
		t.Fatalf("first POST: %d %+v", code, a)
	}
	for _, srv := range []string{s2.URL, s1.URL} {
		code, b := post(t, srv)
		if code != http.StatusConflict || b.Running.Owner != "admin-1" || !b.Running.StartedAt.Equal(a.Started.StartedAt) || b.Running.Fence != a.Started.Fence {
			t.Fatalf("POST during the rebuild: %d %+v, want 409 naming admin-1 started %s", code, b, a.Started.StartedAt)
		}
	}
	r1.wait()
	if rows, gen := w.live(t); rows != 200 || uint64(gen) != a.Started.Fence {
		t.Fatalf("live index: %d rows, generation %d", rows, gen)
	}
	code, c := post(t, s2.URL)
	if code != http.StatusAccepted || c.Started.Owner != "admin-2" {
		t.Fatalf("POST after the rebuild: %d %+v", code, c)
	}
	r2.wait()
	resp, err := http.Get(s1.URL + "/rebuild")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /rebuild: %d", resp.StatusCode)
	}
}

// TestSearchIndex runs every test as a subtest, so that they share one PostgreSQL
// server (testserver.Postgres keeps it while a user is running).
func TestSearchIndex(t *testing.T) {
	testserver.Postgres(t)
	t.Run("CrashMidRebuild", testCrashMidRebuild)
	t.Run("AdminAPI", testAdminAPI)
}
