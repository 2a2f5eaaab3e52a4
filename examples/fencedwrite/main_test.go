package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/examples/internal/exampletest"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5"
)

func TestMain(m *testing.M) { exampletest.Main(m) }

// testPausedWriterRejected: A acquires (fence n) and is SIGSTOPped past
// its TTL; B acquires (fence > n) and writes; A is SIGCONTed, writes, and
// is rejected. The row keeps B's value.
func testPausedWriterRejected(t *testing.T) {
	bin := exampletest.Build(t, ".")
	db := testserver.Postgres(t).NewDatabase(t)
	env := []string{"DLOCK_URL=" + testserver.Redis(t).URL(), "DATABASE_URL=" + db}
	const ttl = time.Second

	a := exampletest.Start(t, "A", bin, env, "-ttl", ttl.String(), "-value", "from A", "-gate")
	fa := fenceOf(t, a.Expect("acquired", time.Minute))
	a.Signal(syscall.SIGSTOP)
	time.Sleep(ttl + 500*time.Millisecond)

	code, out := exampletest.Run(t, "B", bin, env, time.Minute, "-ttl", ttl.String(), "-value", "from B")
	if code != 0 {
		t.Fatalf("B exited %d: %q", code, out)
	}
	fb := fenceOf(t, out[0])
	if fb <= fa {
		t.Fatalf("B's fence %d is not above A's %d", fb, fa)
	}

	a.Signal(syscall.SIGCONT)
	a.Send("write")
	line := a.Expect("rejected", time.Minute)
	if !strings.Contains(line, fmt.Sprint(fa)) || !strings.Contains(line, fmt.Sprint(fb)) {
		t.Errorf("rejection %q does not name both fences %d and %d", line, fa, fb)
	}
	if code, _ := a.Wait(time.Minute); code != 3 {
		t.Fatalf("A exited %d, want 3 (stale)", code)
	}
	if body := body(t, db); body != "from B" {
		t.Fatalf("row holds %q, want B's write", body)
	}
}

// testUnpausedWriterWrites is the control: without the pause, A's write
// lands, so the rejection above is caused by the pause and nothing else.
func testUnpausedWriterWrites(t *testing.T) {
	bin := exampletest.Build(t, ".")
	db := testserver.Postgres(t).NewDatabase(t)
	env := []string{"DLOCK_URL=" + testserver.Redis(t).URL(), "DATABASE_URL=" + db}
	code, out := exampletest.Run(t, "A", bin, env, time.Minute, "-value", "from A")
	if code != 0 || !strings.HasPrefix(out[len(out)-1], "wrote") {
		t.Fatalf("A exited %d: %q", code, out)
	}
	if body := body(t, db); body != "from A" {
		t.Fatalf("row holds %q", body)
	}
}

func fenceOf(t *testing.T, line string) uint64 {
	t.Helper()
	var f uint64
	if _, err := fmt.Sscanf(line[strings.Index(line, "fence="):], "fence=%d", &f); err != nil {
		t.Fatalf("no fence in %q: %v", line, err)
	}
	return f
}

func body(t *testing.T, url string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var b string
	if err := conn.QueryRow(ctx, `SELECT body FROM fenced_docs WHERE id = 'account-42'`).Scan(&b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFencedWrite runs every test as a subtest, so that they share one PostgreSQL
// server (testserver.Postgres keeps it while a user is running).
func TestFencedWrite(t *testing.T) {
	testserver.Postgres(t)
	t.Run("PausedWriterRejected", testPausedWriterRejected)
	t.Run("UnpausedWriterWrites", testUnpausedWriterWrites)
}
