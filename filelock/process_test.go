package filelock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// envChild makes the test binary a child process: "ROLE URL NAME".
const envChild = "FILELOCK_TEST_CHILD"

// childMain plays a child role and returns the exit code.
func childMain(spec string) int {
	role, rest, _ := strings.Cut(spec, " ")
	url, name, _ := strings.Cut(rest, " ")
	switch role {
	case "open":
		return openerMain(url, name)
	case "contend":
		return contenderMain(url, name)
	}
	return waiterMain(url, name)
}

// openerMain opens url (perhaps creating the database), takes and releases
// name, and says ok.
func openerMain(url, name string) int {
	ctx := context.Background()
	l, err := dlock.Open(ctx, url)
	if err == nil {
		var ls *dlock.Lease
		if ls, err = l.TryAcquire(ctx, name); err == nil {
			err = errors.Join(ls.Release(ctx), l.Close())
		}
	}
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("ok")
	return 0
}

// waiterMain checks that name is held, then waits for it with a backoff so
// long (an hour) that only the driver's release watcher can wake it soon.
func waiterMain(url, name string) int {
	ctx := context.Background()
	l, err := dlock.Open(ctx, url, dlock.WithBackoff(time.Hour, time.Hour), dlock.WithWait(5*time.Minute))
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	defer l.Close()
	if _, err := l.TryAcquire(ctx, name); err == nil {
		fmt.Println("error: not held")
		return 1
	}
	fmt.Println("held")
	ls, err := l.Acquire(ctx, name)
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	fmt.Println("acquired", ls.Fence())
	return 0
}

// TestCrossProcessWakeUp: a waiter in another OS process notices a release
// within seconds although its backoff would have it sleep for minutes.
func TestCrossProcessWakeUp(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "x.db")
	l := open(t, path)
	ls, err := l.Acquire(ctx, "shared", dlock.WithTTL(10*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	lines := startChild(t, "wait file://"+path+" shared")
	if !lines.Scan() || lines.Text() != "held" {
		t.Fatalf("child said %q, want held", lines.Text())
	}
	time.Sleep(300 * time.Millisecond) // let it start waiting
	released := time.Now()
	if err := ls.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() { lines.Scan(); got <- lines.Text() }()
	select {
	case s := <-got:
		if want := fmt.Sprintf("acquired %d", ls.Fence()+1); s != want {
			t.Fatalf("child said %q, want %q", s, want)
		}
		t.Logf("waiter in another process acquired %s after the release", time.Since(released))
	case <-time.After(15 * time.Second):
		t.Fatal("waiter in another process not woken within 15s of the release")
	}
}

// startChild starts the test binary as a child process playing spec and
// returns its output lines; it is killed when t ends.
func startChild(t *testing.T, spec string) *bufio.Scanner {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envChild+"="+spec)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return bufio.NewScanner(out)
}

// TestProcessesCreateTogether: several processes opening one new database
// at the same moment all succeed (schema creation and the switch to WAL
// mode wait for each other instead of failing with SQLITE_BUSY).
func TestProcessesCreateTogether(t *testing.T) {
	for round := range 2 {
		url := fmt.Sprintf("file://%s/new%d/dlock.db", t.TempDir(), round)
		var outs []*bufio.Scanner
		for i := range 5 {
			outs = append(outs, startChild(t, fmt.Sprintf("open %s name%d", url, i)))
		}
		for i, out := range outs {
			if !out.Scan() || out.Text() != "ok" {
				t.Fatalf("round %d, child %d: %q, want ok", round, i, out.Text())
			}
		}
	}
}
