package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestOncePerSlotTwoHosts: two hosts' crons fire the same fast job 300 ms
// apart. Under a plain `dlock run` both run it (the lock is free again by
// the time the second host fires: 10 of 10 double runs); with --once-per
// the second host finds the slot taken, names the run that has it, and
// exits 75, in every one of 10 tries.
func TestOncePerSlotTwoHosts(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	dir := t.TempDir()
	doubles := 0
	for i := range 10 {
		plain := fmt.Sprintf("plain-%d", i)
		ran := dir + "/" + plain
		for _, host := range []string{"host-a", "host-b"} {
			runBin(t, env, "run", "--owner", host, plain, "--", "sh", "-c", "echo "+host+" >> "+ran)
			time.Sleep(300 * time.Millisecond)
		}
		if lines(t, ran) == 2 {
			doubles++
		}
	}
	t.Logf("plain dlock run, two hosts 300 ms apart: %d of 10 double runs", doubles)
	if doubles != 10 {
		t.Errorf("plain dlock run: %d of 10 double runs; the control should show the double run every time", doubles)
	}
	for i := range 10 {
		name := fmt.Sprintf("once-%d", i)
		ran := dir + "/" + name
		a := runBin(t, env, "run", "--owner", "host-a", "--once-per", "1h", name, "--", "sh", "-c", "echo host-a >> "+ran)
		time.Sleep(300 * time.Millisecond)
		b := runBin(t, env, "run", "--owner", "host-b", "--once-per", "1h", name, "--", "sh", "-c", "echo host-b >> "+ran)
		if a.code != 0 || b.code != ExitHeld || lines(t, ran) != 1 {
			t.Fatalf("try %d: host-a exit %d, host-b exit %d (%s), the job ran %d times; want 0, 75, once", i, a.code, b.code, b.stderr, lines(t, ran))
		}
		for _, want := range []string{"ran on host-a", "fence ", ": ok", "not running the command (exit 75)"} {
			if !strings.Contains(b.stderr, want) {
				t.Errorf("host-b's line lacks %q: %s", want, b.stderr)
			}
		}
		assertOneLine(t, b, "slot taken")
	}
	r := runBin(t, env, "runs", "--json", "once-0")
	var got runsRecord
	if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || len(got.Runs) != 1 || got.Runs[0].Owner != "host-a" || got.Runs[0].State != "ok" {
		t.Errorf("dlock runs --json once-0 = %q (%v); want host-a's one run, ok", r.stdout, err)
	}
}

// lines counts the lines of the file at path (0 when it does not exist).
func lines(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}
