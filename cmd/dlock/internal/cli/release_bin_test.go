package cli

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/sqlitefence"
	_ "modernc.org/sqlite" // the fence-checking resource of the test
)

// TestReleaseForceFencesTheOldHolder: an admin force-releases a held lock;
// the new fence is printed, the evicted `dlock run` notices and exits 76,
// the next holder writes with a higher fence, and the evicted holder's
// fenced write is then rejected by the resource.
func TestReleaseForceFencesTheOldHolder(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	var out, errb syncBuffer
	old := startDlock(t, env, &out, &errb, "run", "--ttl", "3s", "--grace", "1s", "ledger", "--",
		"sh", "-c", "echo $DLOCK_FENCE > "+dir+"/old-fence; sleep 60")
	oldFence, _ := strconv.ParseUint(waitFile(t, dir+"/old-fence", 30*time.Second), 10, 64)

	r := runBin(t, env, "release", "--force", "ledger")
	if r.code != 0 {
		t.Fatalf("release --force: exit %d: %s", r.code, r.stderr)
	}
	m := regexp.MustCompile(`its fence is now (\d+)`).FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(r.stdout, "rejects") {
		t.Fatalf("release output does not give the new fence and its effect: %q", r.stdout)
	}
	if nf, _ := strconv.ParseUint(m[1], 10, 64); nf <= oldFence {
		t.Fatalf("new fence %d is not above the evicted holder's %d", nf, oldFence)
	}

	r = runBin(t, env, "run", "ledger", "--", "sh", "-c", "echo $DLOCK_FENCE > "+dir+"/new-fence")
	if r.code != 0 {
		t.Fatalf("the next holder could not take the lock: %d %s", r.code, r.stderr)
	}
	newFence, _ := strconv.ParseUint(waitFile(t, dir+"/new-fence", time.Second), 10, 64)

	db, registerTable := fencedRegister(t, dir)
	ctx := context.Background()
	if err := registerTable.Update(ctx, db, "report", newFence, sqlitefence.Values{"value": "new"}); err != nil {
		t.Fatalf("the new holder's write (fence %d) was refused: %v", newFence, err)
	}
	err := registerTable.Update(ctx, db, "report", oldFence, sqlitefence.Values{"value": "stale"})
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("the evicted holder's write (fence %d) after the new holder's (%d): %v, want fence.ErrStale", oldFence, newFence, err)
	}

	waited := make(chan struct{})
	go func() { _ = old.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(60 * time.Second):
		_ = old.Process.Signal(syscall.SIGKILL)
		<-waited
		t.Fatal("the evicted dlock run never noticed the loss")
	}
	if code := old.ProcessState.ExitCode(); code != ExitLeaseLost {
		t.Errorf("evicted dlock run: exit %d, want %d; stderr %s", code, ExitLeaseLost, errb.String())
	}
}

// fencedRegister opens a SQLite register row ('report') in dir, closed at
// the end of the test, and the fence-checking table over it.
func fencedRegister(t *testing.T, dir string) (*sql.DB, sqlitefence.Table) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "resource.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	_, err = db.Exec(`CREATE TABLE register (key TEXT PRIMARY KEY, value TEXT, fence INTEGER NOT NULL DEFAULT 0);
		INSERT INTO register (key, value, fence) VALUES ('report', 'initial', 0)`)
	if err != nil {
		t.Fatal(err)
	}
	return db, sqlitefence.Table{Name: "register", Key: "key", Fence: "fence"}
}

// TestReleaseForceSaysWhatIsTrue holds `dlock release --force`'s report
// to what then happens at a fence-checking resource: the evicted holder
// (fence F) has written to a register; the report names F and the new
// fence N. A claim that writes fenced with F are rejected at once is
// checked by such a write right after the release: a fence guard rejects
// a fence only once a newer one has written, so it is accepted. The
// report must say what holds: the next holder's fence is above N, and
// writes fenced with F or lower are rejected once a newer fence's write
// has reached the resource, which the test then does.
func TestReleaseForceSaysWhatIsTrue(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	var out, errb syncBuffer
	startDlock(t, env, &out, &errb, "run", "--ttl", "30s", "ledger", "--",
		"sh", "-c", "echo $DLOCK_FENCE > "+dir+"/old-fence; sleep 60")
	oldFence, _ := strconv.ParseUint(waitFile(t, dir+"/old-fence", 30*time.Second), 10, 64)
	db, register := fencedRegister(t, dir)
	ctx := context.Background()
	if err := register.Update(ctx, db, "report", oldFence, sqlitefence.Values{"value": "old"}); err != nil {
		t.Fatalf("the holder's write (fence %d): %v", oldFence, err)
	}

	r := runBin(t, env, "release", "--force", "ledger")
	if r.code != 0 {
		t.Fatalf("release --force: exit %d: %s", r.code, r.stderr)
	}
	t.Logf("release --force printed %q", r.stdout)
	staleErr := register.Update(ctx, db, "report", oldFence, sqlitefence.Values{"value": "stale, before any newer write"})
	if strings.Contains(r.stdout, "now rejected") && staleErr == nil {
		t.Fatalf("release --force said %q, but the evicted holder's write (fence %d) right after it was accepted", r.stdout, oldFence)
	}
	if staleErr != nil {
		t.Fatalf("the evicted holder's write before any newer one: %v, want accepted (fence guards reject a fence only after a newer one wrote)", staleErr)
	}
	m := regexp.MustCompile(`^released ledger, held by \S+ \(fence (\d+)\); its fence is now (\d+): the next holder's fence will be above it, ` +
		`and a fence-checking resource rejects writes fenced with (\d+) or lower once a write with a newer fence has reached it\n$`).
		FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("release --force printed %q: want the evicted fence, the new fence, and when the old fence's writes are rejected", r.stdout)
	}
	evicted, _ := strconv.ParseUint(m[1], 10, 64)
	newFence, _ := strconv.ParseUint(m[2], 10, 64)
	if evicted != oldFence || m[3] != m[1] || newFence <= oldFence {
		t.Fatalf("release --force printed %q: want the evicted fence %d twice and a new fence above it", r.stdout, oldFence)
	}

	r = runBin(t, env, "run", "ledger", "--", "sh", "-c", "echo $DLOCK_FENCE > "+dir+"/new-fence")
	if r.code != 0 {
		t.Fatalf("the next holder could not take the lock: %d %s", r.code, r.stderr)
	}
	nextFence, _ := strconv.ParseUint(waitFile(t, dir+"/new-fence", time.Second), 10, 64)
	if nextFence <= newFence {
		t.Errorf("the next holder's fence %d is not above the new fence %d that release --force printed", nextFence, newFence)
	}
	if err := register.Update(ctx, db, "report", nextFence, sqlitefence.Values{"value": "new"}); err != nil {
		t.Fatalf("the next holder's write (fence %d): %v", nextFence, err)
	}
	err := register.Update(ctx, db, "report", oldFence, sqlitefence.Values{"value": "stale, after the newer write"})
	if !errors.Is(err, fence.ErrStale) {
		t.Errorf("the evicted holder's write (fence %d) after the next holder's (%d): %v, want fence.ErrStale", oldFence, nextFence, err)
	}
}

// TestReleaseForceTellsTheFileHolderAtOnce: on the file backend (SQLite,
// no server to push anything), `dlock run --ttl 30s` holding a lock in
// one process is told of `dlock release --force` from another process by
// its store's watcher, not at its next refresh (10 s away, which would
// report "lost: expired"): it says force-released, stops its command and
// exits 76. The time from the release's return to the exit is logged.
func TestReleaseForceTellsTheFileHolderAtOnce(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	var out, errb syncBuffer
	holder := startDlock(t, env, &out, &errb, "run", "--ttl", "30s", "--grace", "1s", "ledger", "--",
		"sh", "-c", "echo $DLOCK_FENCE > "+dir+"/fence; exec sleep 100")
	waitFile(t, dir+"/fence", 30*time.Second)

	r := runBin(t, env, "release", "--force", "ledger")
	if r.code != 0 {
		t.Fatalf("release --force: exit %d: %s", r.code, r.stderr)
	}
	released := time.Now()
	waited := make(chan struct{})
	go func() { _ = holder.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(9 * time.Second): // before the first refresh, at 10 s
		_ = holder.Process.Signal(syscall.SIGKILL)
		<-waited
		t.Fatalf("dlock run still running 9 s after the force-release (its next refresh is at 10 s): not told; stderr %s", errb.String())
	}
	t.Logf("force-release → dlock run exited in %v", time.Since(released).Round(time.Millisecond))
	if code := holder.ProcessState.ExitCode(); code != ExitLeaseLost {
		t.Errorf("exit %d, want %d; stderr %s", code, ExitLeaseLost, errb.String())
	}
	if !strings.Contains(errb.String(), "force-released") {
		t.Errorf("stderr does not say force-released: %s", errb.String())
	}
}
