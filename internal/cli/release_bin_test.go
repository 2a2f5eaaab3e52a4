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
	m := regexp.MustCompile(`new fence (\d+)`).FindStringSubmatch(r.stdout)
	if m == nil || !strings.Contains(r.stdout, "rejected") {
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
