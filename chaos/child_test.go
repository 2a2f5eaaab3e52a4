package chaos

import (
	"bufio"
	"context"
	"encoding/json"
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
)

// envChild carries a childSpec (JSON) to a re-executed test binary.
const envChild = "DLOCK_CHAOS_CHILD"

// Child roles.
const (
	roleHold = "hold" // acquire, print "held ...", hold until stdin EOF or death
	roleRMW  = "rmw"  // acquire, read the counter, wait for "go", write it + 1, say "wrote ..."
)

// childSpec is what a child process is asked to do.
type childSpec struct {
	Role   string
	URL    string
	Name   string
	TTL    time.Duration
	DB     string // the resource's Postgres URL or MySQL DSN (rmw)
	MySQL  bool   // DB is a MySQL DSN (rmw)
	Key    string // the resource row (rmw)
	Fenced bool   // write through pgfence or mysqlfence (rmw); plain UPDATE otherwise
}

func childMain(raw string) int {
	var spec childSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	if err := spec.run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 1
	}
	return 0
}

func (c childSpec) run() error {
	ctx := context.Background()
	l, err := dlock.Open(ctx, c.URL, dlock.WithTTL(c.TTL), dlock.WithWait(time.Minute),
		dlock.WithOwner(fmt.Sprintf("chaos-child/%d", os.Getpid())))
	if err != nil {
		return err
	}
	defer l.Close()
	call := time.Now()
	ls, err := l.Acquire(ctx, c.Name)
	if err != nil {
		return err
	}
	ret := time.Now()
	fmt.Printf("held %d %d %d %d\n", ls.Fence(), call.UnixNano(), ret.UnixNano(), wallExpiry(ls).UnixNano())
	if c.Role == roleRMW {
		return c.rmw(ctx, ls)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	return ls.Release(ctx)
}

// rmw is a read-modify-write that, like a paused process, does not look at
// the lease between its read and its write.
func (c childSpec) rmw(ctx context.Context, ls *dlock.Lease) error {
	store, err := openCounters(ctx, c.DB, c.MySQL)
	if err != nil {
		return err
	}
	defer store.Close()
	n, err := store.read(ctx, c.Key)
	if err != nil {
		return err
	}
	fmt.Printf("read %d\n", n)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return err
	}
	call := time.Now()
	ok, err := store.write(ctx, c.Key, ls.Fence(), n+1, c.Fenced)
	if err != nil {
		return err
	}
	ret := time.Now()
	fmt.Printf("wrote %v %d %d %d\n", ok, call.UnixNano(), ret.UnixNano(), wallExpiry(ls).UnixNano())
	return nil
}

// wallExpiry is ls's local expiry (Lease.Expires, on this process's
// monotonic clock: the send time of the last confirmed grant or refresh,
// plus the TTL, less a drift margin) as a wall-clock time that another
// process on this host can compare.
func wallExpiry(ls *dlock.Lease) time.Time {
	now := time.Now()
	return now.Add(ls.Expires().Sub(now))
}

// proc is a running child process.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr strings.Builder
	done   chan struct{}
}

// startChild re-executes the test binary as a child; it is killed, if
// still running, when t ends.
func startChild(t *testing.T, spec childSpec) *proc {
	t.Helper()
	raw, _ := json.Marshal(spec)
	p := &proc{t: t, cmd: exec.Command(os.Args[0], "-test.run=^$"), lines: make(chan string, 16), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), envChild+"="+string(raw))
	p.cmd.Stderr = &p.stderr
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		_ = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(p.kill)
	return p
}

// expect waits for the child's next line, which must start with word, and
// returns its other fields.
func (p *proc) expect(word string, timeout time.Duration) []string {
	p.t.Helper()
	select {
	case line, ok := <-p.lines:
		if !ok {
			<-p.done
			p.t.Fatalf("child exited before %q: %s", word, p.stderr.String())
		}
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != word {
			p.t.Fatalf("child said %q, want %q", line, word)
		}
		return f[1:]
	case <-time.After(timeout):
		p.t.Fatalf("child did not say %q within %s", word, timeout)
	}
	return nil
}

func (p *proc) send(line string) { _, _ = io.WriteString(p.stdin, line+"\n") }

func (p *proc) signal(sig syscall.Signal) { _ = p.cmd.Process.Signal(sig) }

// kill ends the child with SIGKILL and waits for it.
func (p *proc) kill() {
	_ = p.cmd.Process.Signal(syscall.SIGCONT)
	_ = p.cmd.Process.Kill()
	<-p.done
}

// held parses a child's "held" line: fence, call, return, local expiry.
func held(t *testing.T, f []string) (fence uint64, call, ret, expires time.Time) {
	t.Helper()
	if len(f) != 4 {
		t.Fatalf("held line %q", f)
	}
	fence, _ = strconv.ParseUint(f[0], 10, 64)
	return fence, unixNano(f[1]), unixNano(f[2]), unixNano(f[3])
}

func unixNano(s string) time.Time {
	n, _ := strconv.ParseInt(s, 10, 64)
	return time.Unix(0, n)
}
