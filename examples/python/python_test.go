package python_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/examples/internal/exampletest"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/sqlitefence"
)

// guard is the Go guard on the table the script writes.
var guard = sqlitefence.Table{Name: "resources", Key: "name"}

// TestDemo runs the script's demo against the real server: A takes a
// lease (fence N) and writes; an admin force-releases it and the lost
// event reaches A's events thread; B takes the lock (fence M > N) and
// writes; A's late write with fence N is rejected by the guard. Then the
// Go guard and the Python one share the file and agree on the rule.
func TestDemo(t *testing.T) {
	py := python3(t)
	s := startServer(t)
	db := tempDB(t)
	code, out := exampletest.Run(t, "demo", py, s.env(db, "jobs", true), timeout, script)
	if code != 0 {
		t.Fatalf("demo exited %d:\n%s", code, strings.Join(out, "\n"))
	}
	lines := expectLines(t, out,
		"acquired client=A", "write result=ok client=A", "force-released name=jobs",
		"lost client=A reason=force-released", "acquired client=B", "write result=ok client=B",
		"write result=rejected client=A", "released client=B", "check result=ok")
	n, m := fenceOf(t, lines[0]), fenceOf(t, lines[4])
	if m <= n || fenceOf(t, lines[1]) != n || fenceOf(t, lines[5]) != m {
		t.Fatalf("fences: A %d, B %d; want B's above A's:\n%s", n, m, strings.Join(out, "\n"))
	}
	if rej := fields(t, lines[6]); rej["fence"] != u(n) || rej["current"] != u(m) {
		t.Errorf("rejection %q: want fence=%d current=%d", lines[6], n, m)
	}
	sqlDB := openDB(t, db)
	if f, v := row(t, sqlDB, "jobs"); f != m || v != "written by B" {
		t.Fatalf("row holds fence %d %q, want B's write (fence %d)", f, v, m)
	}
	testInterop(t, py, s, db, "jobs", n, m)
}

// testInterop: after Python wrote fence m on name, the Go guard rejects a
// write with the older fence n and accepts m+1; then the Python guard
// rejects fence m (Go's m+1 is newer) and accepts m+1 (equal fences pass).
func testInterop(t *testing.T, py string, s server, db, name string, n, m uint64) {
	ctx := context.Background()
	sqlDB := openDB(t, db)
	err := guard.Upsert(ctx, sqlDB, name, n, sqlitefence.Values{"value": "stale from Go"})
	var se *fence.StaleError
	if !errors.As(err, &se) || se.Offered != n || se.Current != m {
		t.Fatalf("Go write with fence %d after Python's %d: %v, want a StaleError", n, m, err)
	}
	if err := guard.Upsert(ctx, sqlDB, name, m+1, sqlitefence.Values{"value": "from Go"}); err != nil {
		t.Fatalf("Go write with fence %d: %v", m+1, err)
	}
	env := s.env(db, name, false)
	code, out := exampletest.Run(t, "py-stale", py, env, timeout, script, "write", "--fence", u(m), "--value", "stale from Python")
	if code != 3 || len(out) != 1 || !strings.HasPrefix(out[0], "write result=rejected") || fields(t, out[0])["current"] != u(m+1) {
		t.Fatalf("Python write with fence %d after Go's %d: exit %d, %q; want exit 3, rejected with current=%d", m, m+1, code, out, m+1)
	}
	if f, v := row(t, sqlDB, name); f != m+1 || v != "from Go" {
		t.Fatalf("after the stale Python write the row holds %d %q, want Go's", f, v)
	}
	code, out = exampletest.Run(t, "py-equal", py, env, timeout, script, "write", "--fence", u(m+1), "--value", "equal from Python")
	if code != 0 {
		t.Fatalf("Python write with Go's fence %d: exit %d, %q; want accepted", m+1, code, out)
	}
	if f, v := row(t, sqlDB, name); f != m+1 || v != "equal from Python" {
		t.Fatalf("row holds %d %q, want Python's write with the equal fence", f, v)
	}
	cur, err := guard.Current(ctx, sqlDB, name)
	if err != nil || cur != m+1 {
		t.Fatalf("Go guard reads fence %d, %v; want %d", cur, err, m+1)
	}
}

// TestTwoClients drives two processes step by step: A holds a lease,
// writes (the row holds A's fence) and renews it, an admin force-releases it from Go and
// A's events thread reports the loss, B takes the lock and writes, and A
// writing again with its old fence is rejected; the row keeps B's write.
func TestTwoClients(t *testing.T) {
	py := python3(t)
	s := startServer(t)
	db := tempDB(t)
	env := s.env(db, "reports", false)
	a := exampletest.Start(t, "A", py, env, script, "hold", "--client", "A", "--value", "from A")
	n := fenceOf(t, a.Expect("acquired client=A", timeout))
	if got := fenceOf(t, a.Expect("write result=ok client=A", timeout)); got != n {
		t.Fatalf("A wrote with fence %d, acquired %d", got, n)
	}
	sqlDB := openDB(t, db)
	if f, v := row(t, sqlDB, "reports"); f != n || v != "from A" {
		t.Fatalf("after A's write the row holds %d %q, want A's (fence %d)", f, v, n)
	}

	a.Send("renew")
	a.Expect("renewed client=A", timeout)

	s.forceRelease(t, "reports")
	if r := fields(t, a.Expect("lost client=A", 10*time.Second))["reason"]; r != "force-released" {
		t.Errorf("A lost its lease with reason %q, want force-released", r)
	}

	b := exampletest.Start(t, "B", py, env, script, "hold", "--client", "B", "--value", "from B")
	m := fenceOf(t, b.Expect("acquired client=B", timeout))
	b.Expect("write result=ok client=B", timeout)
	if m <= n {
		t.Fatalf("B's fence %d is not above A's %d", m, n)
	}

	a.Send("write")
	if rej := fields(t, a.Expect("write", timeout)); rej["result"] != "rejected" || rej["fence"] != u(n) || rej["current"] != u(m) {
		t.Fatalf("A's write with its old fence: %v; want rejected, fence=%d current=%d", rej, n, m)
	}
	if f, v := row(t, sqlDB, "reports"); f != m || v != "from B" {
		t.Fatalf("row holds %d %q, want B's write (fence %d)", f, v, m)
	}
	a.Send("release")
	if r := fields(t, a.Expect("release", timeout)); r["result"] != "lost" {
		t.Errorf("A's release of its lost lease: %v, want result=lost", r)
	}
	b.Send("release")
	b.Expect("released client=B", timeout)
	for _, p := range []*exampletest.Proc{a, b} {
		if code, out := p.Wait(timeout); code != 0 {
			t.Errorf("exit %d: %q", code, out)
		}
	}
}

// TestDemoWithoutAdmin: without an admin token A releases its lease and
// keeps its fence; its late write is still rejected.
func TestDemoWithoutAdmin(t *testing.T) {
	py := python3(t)
	s := startServer(t)
	db := tempDB(t)
	code, out := exampletest.Run(t, "demo", py, s.env(db, "plain", false), timeout, script)
	if code != 0 {
		t.Fatalf("demo exited %d:\n%s", code, strings.Join(out, "\n"))
	}
	lines := expectLines(t, out, "acquired client=A", "note", "acquired client=B", "write result=rejected client=A", "check result=ok")
	if n, m := fenceOf(t, lines[0]), fenceOf(t, lines[2]); m <= n {
		t.Fatalf("B's fence %d is not above A's %d", m, n)
	}
}

// TestBadToken: a wrong token is a clear 401 error, and the script never
// prints the token it sent.
func TestBadToken(t *testing.T) {
	py := python3(t)
	s := startServer(t)
	bad := "not-the-token-" + randomHex(8)
	env := append(s.env(tempDB(t), "x", false), "DLOCK_SERVE_TOKEN="+bad)
	code, out := exampletest.Run(t, "bad-token", py, env, timeout, script)
	all := strings.Join(out, "\n")
	if code != 1 || !strings.Contains(all, "error what=DlockError") || !strings.Contains(all, "401") {
		t.Fatalf("exit %d, output %q; want exit 1 with a 401 DlockError", code, all)
	}
	if strings.Contains(all, bad) {
		t.Fatalf("the output shows the token: %q", all)
	}
}

// expectLines finds lines starting with each prefix, in order, and
// returns them.
func expectLines(t *testing.T, out []string, prefixes ...string) []string {
	t.Helper()
	var got []string
	i := 0
	for _, p := range prefixes {
		for i < len(out) && !strings.HasPrefix(out[i], p) {
			i++
		}
		if i == len(out) {
			t.Fatalf("no line %q (after %q) in the output:\n%s", p, got, strings.Join(out, "\n"))
		}
		got = append(got, out[i])
		i++
	}
	return got
}

// u formats a fence as the script prints it.
func u(f uint64) string { return strconv.FormatUint(f, 10) }
