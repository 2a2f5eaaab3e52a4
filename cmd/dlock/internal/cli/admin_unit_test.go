package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

func TestLsAndInspectJSON(t *testing.T) {
	url := memURL(t)
	hold(t, url, "app/a", dlock.WithOwner("o1"), dlock.WithTTL(time.Minute))
	hold(t, url, "other", dlock.WithOwner("o2"), dlock.WithTTL(time.Minute))

	std, out, _ := testIO()
	if err := runLs(context.Background(), &lsOptions{URL: url, Prefix: "app/", JSON: true}, std); err != nil {
		t.Fatal(err)
	}
	var recs []holderRecord
	if err := json.Unmarshal(out.Bytes(), &recs); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if len(recs) != 1 || recs[0].Name != "app/a" || recs[0].Owner != "o1" || recs[0].Fence != 1 || recs[0].TTLLeftMS <= 0 {
		t.Errorf("ls --json app/ = %+v", recs)
	}

	std, out, _ = testIO()
	if err := runInspect(context.Background(), &inspectOptions{URL: url, Name: "free", JSON: true}, std); err != nil {
		t.Fatal(err)
	}
	var rec holderRecord
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil || rec.Held || rec.Name != "free" {
		t.Errorf("inspect --json free = %s (%v)", out, err)
	}

	std, out, _ = testIO()
	if err := runInspect(context.Background(), &inspectOptions{URL: url, Name: "other"}, std); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "o2") || !strings.Contains(out.String(), "FENCE") {
		t.Errorf("inspect table = %q", out)
	}
}

func TestReleaseForce(t *testing.T) {
	url := memURL(t)
	_, lease := hold(t, url, "wedged", dlock.WithOwner("stuck"), dlock.WithTTL(time.Minute))
	std, out, _ := testIO()
	err := runRelease(context.Background(), &releaseOptions{URL: url, Name: "wedged"}, std)
	if codeOf(err) != ExitUsage {
		t.Fatalf("release without --force: %v, want a usage error", err)
	}
	if err := runRelease(context.Background(), &releaseOptions{URL: url, Name: "wedged", Force: true}, std); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("held by stuck (fence %d); its fence is now %d", lease.Fence(), lease.Fence()+1)
	if !strings.Contains(out.String(), want) || !strings.Contains(out.String(), "once a write with a newer fence has reached it") {
		t.Errorf("release output %q lacks %q", out, want)
	}
}

func TestMigrateWithoutSchema(t *testing.T) {
	std, out, _ := testIO()
	if err := runMigrate(context.Background(), &migrateOptions{URL: memURL(t)}, std); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "nothing to do") {
		t.Errorf("migrate output %q", out)
	}
}

func TestBenchJSON(t *testing.T) {
	std, out, _ := testIO()
	opts := &benchOptions{URL: memURL(t), Ops: 40, TTL: 5 * time.Second, JSON: true} // a count, not a time: no floor on speed
	if err := runBench(context.Background(), opts, std); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != len(benchWorkloads) {
		t.Fatalf("%d records, want %d:\n%s", len(lines), len(benchWorkloads), out)
	}
	for _, l := range lines {
		var r benchResult
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if r.Ops == 0 || r.Violations != 0 || r.Errors != 0 || r.LatencyP99Ms < r.LatencyP50Ms {
			t.Errorf("implausible record %+v", r)
		}
		if r.Contended && r.HandoffP50Ms <= 0 {
			t.Errorf("contended record without handoff times: %+v", r)
		}
	}
}

func TestBenchRejectsUnboundedDuration(t *testing.T) {
	std, _, _ := testIO()
	err := runBench(context.Background(), &benchOptions{URL: memURL(t), Duration: time.Hour}, std)
	if codeOf(err) != ExitUsage {
		t.Fatalf("got %v, want a usage error", err)
	}
}

func TestErrorLine(t *testing.T) {
	err := fmt.Errorf("dlock: open x: %w", errors.New("line one\nline two"))
	if got := errorLine(err); got != "dlock: open x: line one line two" {
		t.Errorf("errorLine = %q", got)
	}
	if got := errorLine(errors.New("plain")); got != "dlock: plain" {
		t.Errorf("errorLine = %q", got)
	}
	if got := errorLine(exitWith(3, nil)); got != "" {
		t.Errorf("silent exit printed %q", got)
	}
}

func TestExecuteUsageExitCodes(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"run", "--bogus", "x"}, {"inspect"}, {"ls", "a", "b"}} {
		std, _, errb := testIO()
		if code := Execute(context.Background(), args, std); code != ExitUsage {
			t.Errorf("%v: exit %d, want %d (%s)", args, code, ExitUsage, errb)
		}
		if n := strings.Count(errb.String(), "\n"); n != 1 {
			t.Errorf("%v: %d stderr lines: %q", args, n, errb)
		}
	}
}
