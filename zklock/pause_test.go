package zklock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// envPauseChild makes the test binary play the paused holder.
const envPauseChild = "ZKLOCK_PAUSE_CHILD"

// TestPausedHolder: holder A (a separate process, watchdog on) is
// SIGSTOPped in the middle of a read-modify-write of a fenced counter,
// longer than its session timeout. ZooKeeper expires A's session, B takes
// the lock with a greater fence and writes. A resumes and writes what it
// computed before the pause: the fence guard rejects it, and A's lease
// ends (Done closes) with ErrLost.
func TestPausedHolder(t *testing.T) {
	srv := testserver.ZooKeeper(t)
	ctx := context.Background()
	name := "pause/" + t.Name()
	var guard fence.Guard
	counter := 41

	a := startPauseChild(t, srv.URL()+"?session_timeout="+childSessionTimeout.String(), name)
	fa := a.expectInt(t, "acquired")
	a.expect(t, "read")
	a.signal(t, syscall.SIGSTOP)
	a.send(t, strconv.Itoa(counter)) // A's read; it computes from it after the pause
	pausedAt := time.Now()

	// B waits for A's session to expire; it must not get the lock before.
	b := locker(t, srv.Addr)
	lb, err := b.Acquire(ctx, name, dlock.WithTTL(2*time.Second), dlock.WithWait(time.Minute))
	if err != nil {
		t.Fatalf("B: %v", err)
	}
	if waited := time.Since(pausedAt); waited < childSessionTimeout {
		t.Errorf("B was granted %s after A paused, before A's session timeout %s", waited, childSessionTimeout)
	}
	if lb.Fence() <= fa {
		t.Fatalf("B's fence %d is not above A's %d", lb.Fence(), fa)
	}
	if err := guard.Do(name, lb.Fence(), func() error { counter++; return nil }); err != nil {
		t.Fatalf("B's write: %v", err)
	}

	a.signal(t, syscall.SIGCONT)
	fields := strings.Fields(a.expect(t, "write"))
	wf, _ := strconv.ParseUint(fields[1], 10, 64)
	value, _ := strconv.Atoi(fields[2])
	err = guard.Do(name, wf, func() error { counter = value; return nil })
	if !errors.Is(err, fence.ErrStale) {
		t.Fatalf("A's stale write (fence %d) was not rejected: %v", wf, err)
	}
	t.Logf("A's stale write rejected: %v", err)
	if counter != 42 {
		t.Errorf("counter = %d, want 42 (B's write only)", counter)
	}
	if line := a.expect(t, "done"); !strings.Contains(line, "lock lost") && !strings.Contains(line, "lost") {
		t.Errorf("A's lease ended with %q, want a loss", line)
	}
	_ = lb.Release(ctx)
	a.wait(t)
}

// pauseChild is the holder's side: acquire, read the counter from stdin,
// write back counter+1 with its fence, then report how its lease ended.
func pauseChild(url, name string) error {
	ctx := context.Background()
	l, err := dlock.Open(ctx, url)
	if err != nil {
		return err
	}
	defer l.Close()
	ls, err := l.Acquire(ctx, name, dlock.WithTTL(2*time.Second), dlock.WithWait(time.Minute))
	if err != nil {
		return err
	}
	fmt.Println("acquired", ls.Fence())
	fmt.Println("read")
	in := bufio.NewReader(os.Stdin)
	line, err := in.ReadString('\n')
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil {
		return err
	}
	fmt.Println("write", ls.Fence(), n+1) // the stale write: no check in between
	select {
	case <-ls.Done():
		fmt.Println("done", ls.Err())
	case <-time.After(10 * time.Second):
		fmt.Println("done: still held 10s after resuming")
	}
	_ = ls.Release(ctx)
	return nil
}

type pauseProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
	errb  strings.Builder
}

func startPauseChild(t *testing.T, url, name string) *pauseProc {
	t.Helper()
	p := &pauseProc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	p.cmd.Env = append(os.Environ(), envPauseChild+"="+url+" "+name)
	p.cmd.Stderr = &p.errb
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewReader(out)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGCONT)
		_ = p.cmd.Process.Kill()
		_ = p.cmd.Wait()
	})
	return p
}

// expect reads the child's next line, which must start with word.
func (p *pauseProc) expect(t *testing.T, word string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		s, _ := p.out.ReadString('\n')
		got <- strings.TrimSpace(s)
	}()
	select {
	case s := <-got:
		if !strings.HasPrefix(s, word) {
			t.Fatalf("child said %q, want %q...; stderr:\n%s", s, word, p.errb.String())
		}
		return s
	case <-time.After(time.Minute):
		_ = p.cmd.Process.Kill()
		t.Fatalf("child said nothing within a minute, want %q", word)
		return ""
	}
}

func (p *pauseProc) expectInt(t *testing.T, word string) uint64 {
	t.Helper()
	f := strings.Fields(p.expect(t, word))
	n, err := strconv.ParseUint(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatalf("no number in %q", f)
	}
	return n
}

func (p *pauseProc) send(t *testing.T, line string) {
	t.Helper()
	if _, err := io.WriteString(p.stdin, line+"\n"); err != nil {
		t.Fatal(err)
	}
}

func (p *pauseProc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
}

func (p *pauseProc) wait(t *testing.T) {
	t.Helper()
	_ = p.stdin.Close()
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("child: %v; stderr:\n%s", err, p.errb.String())
	}
}
