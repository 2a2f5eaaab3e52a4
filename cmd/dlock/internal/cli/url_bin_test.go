package cli

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestURLSettingIsNeverDropped: a URL whose query the backend cannot take
// whole is a usage error, never a setting silently not in force. Go's
// URL.Query drops a pair that holds a ';': a second `dlock run` given
// "mode=advisory;" opened Postgres lease mode — another lock space — and
// ran its command while the first held the advisory lock (fence 361150
// against 137: two holders).
func TestURLSettingIsNeverDropped(t *testing.T) {
	pg := testserver.Postgres(t)
	url := pg.URL() + "&mode=advisory"
	// Both modes' schemas exist, so that the URL that lost its mode would
	// have run in lease mode, as it did.
	for _, u := range []string{pg.URL(), url} {
		if r := runBin(t, nil, "--url", u, "migrate"); r.code != 0 {
			t.Fatalf("migrate %s: exit %d: %s", u, r.code, r.stderr)
		}
	}
	dir := t.TempDir()
	var out, errb syncBuffer
	first := startDlock(t, nil, &out, &errb, "--url", url, "run", "semi", "--",
		"sh", "-c", "echo $DLOCK_FENCE > "+dir+"/first; sleep 60")
	waitFile(t, dir+"/first", 30*time.Second)
	defer func() {
		_ = first.Process.Signal(syscall.SIGTERM)
		_ = first.Wait()
	}()

	for _, bad := range []string{url + ";", pg.URL() + "&table=mytable;&mode=advisory", url + "&mode=advisory"} {
		r := runBin(t, nil, "--url", bad, "run", "semi", "--", "touch", dir+"/second")
		if r.code != ExitUsage {
			t.Errorf("--url %s: exit %d, want %d (usage): %s", bad, r.code, ExitUsage, r.stderr)
		}
		if _, err := os.Stat(dir + "/second"); err == nil {
			t.Fatalf("--url %s: the second command ran while the first held the lock", bad)
		}
		if !strings.Contains(r.stderr, "mode=advisory") && !strings.Contains(r.stderr, "table=mytable;") {
			t.Errorf("--url %s: the error does not name the pair it refused: %s", bad, r.stderr)
		}
		assertOneLine(t, r, "bad URL")
	}
	// The same URL without the stray ';' takes the same lock: held.
	if r := runBin(t, nil, "--url", url, "run", "semi", "--", "true"); r.code != ExitHeld {
		t.Errorf("a well-formed URL: exit %d, want %d (held): %s", r.code, ExitHeld, r.stderr)
	}
}
