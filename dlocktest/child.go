package dlocktest

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
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// childOK is the last line of a child that did all its work. A test binary
// whose TestMain does not call Main runs no tests and exits 0 without it.
const childOK = "dlocktest-child: ok"

// Child roles.
const (
	roleCounter  = "counter"  // N locked read-modify-writes of File
	roleHold     = "hold"     // acquire Names[0], print "held FENCE", wait for stdin EOF
	roleAll      = "all"      // N rounds of AcquireAll(Names) + ReleaseAll
	rolePermit   = "permit"   // a permit of semaphore Names[0] (N permits), then as hold
	roleLeader   = "leader"   // campaign in election Names[0], then as hold
	roleSlots    = "slots"    // N slots of Period from First, clock off by Skew (RunOnce)
	roleSlotHang = "slothang" // claim the slot at First, print "running", hang
	roleHandOn   = "handon"   // acquire Names[0], print "handle FENCE HANDLE", then as hold
)

// childSpec is what a child process is asked to do.
type childSpec struct {
	Role  string
	URL   string
	Names []string
	File  string
	N     int
	TTL   time.Duration
	// Period, Skew and First (Unix ns) are the slots role's schedule, its
	// clock's offset, and the first slot.
	Period time.Duration
	Skew   time.Duration
	First  int64
}

func (c childSpec) opts() []dlock.Option {
	return []dlock.Option{
		dlock.WithTTL(c.TTL),
		dlock.WithWait(2 * time.Minute),
		dlock.WithBackoff(contendBackoffMin, contendBackoffMax),
		dlock.WithOwner(fmt.Sprintf("dlocktest-child/%s/%d", c.Role, os.Getpid())),
	}
}

func (c childSpec) run() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if c.Role == roleSlots {
		return c.slots(ctx) // opens its Locker with a clock of its own
	}
	l, err := dlock.Open(ctx, c.URL)
	if err != nil {
		return err
	}
	defer l.Close()
	switch c.Role {
	case roleCounter:
		return c.counter(ctx, l)
	case roleHold:
		return c.hold(ctx, l)
	case roleAll:
		return c.all(ctx, l)
	case rolePermit:
		sem, err := l.Semaphore(c.Names[0], c.N, c.opts()...)
		if err != nil {
			return err
		}
		return c.keep(sem.Acquire(ctx))
	case roleSlotHang:
		return c.slotHang(ctx, l)
	case roleHandOn:
		return c.handOn(ctx, l)
	case roleLeader:
		el, err := l.Election(c.Names[0], c.opts()...)
		if err != nil {
			return err
		}
		return c.keep(el.Campaign(ctx, fmt.Sprintf("leader/%d", os.Getpid())))
	}
	return fmt.Errorf("unknown role %q", c.Role)
}

func (c childSpec) counter(ctx context.Context, l *dlock.Locker) error {
	for range c.N {
		err := dlock.Do(ctx, l, c.Names[0], func(context.Context, *dlock.Lease) error {
			return bumpFile(c.File)
		}, c.opts()...)
		if err != nil {
			return err
		}
	}
	return nil
}

// bumpFile is a deliberately non-atomic read-modify-write of a decimal
// counter, with an O_EXCL marker file that catches two holders at once.
func bumpFile(path string) error {
	marker, err := os.OpenFile(path+".inside", os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("two holders inside the critical section at once: %w", err)
	}
	marker.Close()
	defer os.Remove(path + ".inside")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("counter file: %w", err)
	}
	time.Sleep(200 * time.Microsecond) // widen the race window
	return os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o600)
}

// hold takes the lock, says so on stdout, and keeps it (watchdog on) until
// stdin reaches EOF or the process is killed.
func (c childSpec) hold(ctx context.Context, l *dlock.Locker) error {
	return c.keep(l.Acquire(ctx, c.Names[0], c.opts()...))
}

// keep says "held FENCE" and keeps the lease until stdin reaches EOF.
func (c childSpec) keep(ls *dlock.Lease, err error) error {
	if err != nil {
		return err
	}
	fmt.Printf("held %d\n", ls.Fence())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return ls.Release(context.Background())
}

// handOn takes the lock, prints its fence and handle (to the test that
// started it, through a pipe), and keeps it, watchdog on, as hold does.
func (c childSpec) handOn(ctx context.Context, l *dlock.Locker) error {
	ls, err := l.Acquire(ctx, c.Names[0], c.opts()...)
	if err != nil {
		return err
	}
	fmt.Printf("handle %d %s\n", ls.Fence(), ls.Handle())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return ls.Release(context.Background())
}

func (c childSpec) all(ctx context.Context, l *dlock.Locker) error {
	for range c.N {
		leases, err := l.AcquireAll(ctx, c.Names, c.opts()...)
		if err != nil {
			return err
		}
		time.Sleep(time.Millisecond)
		if err := dlock.ReleaseAll(ctx, leases); err != nil {
			return err
		}
	}
	return nil
}

// child is a running child process.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
	done   chan error
}

// startChild re-executes the test binary as a child playing spec.Role. The
// child is killed, if still running, when t ends.
func (s *suite) startChild(t *testing.T, spec childSpec) *child {
	t.Helper()
	spec.URL = s.h.URL
	if spec.TTL == 0 {
		spec.TTL = s.ttl
	}
	raw, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: exec.Command(os.Args[0], "-test.run=^$", "-test.count=1"), done: make(chan error, 1)}
	c.cmd.Env = append(os.Environ(), envChild+"="+string(raw))
	c.cmd.Stderr = &c.stderr
	c.stdin, err = c.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	c.stdout = bufio.NewReader(out)
	if err := c.cmd.Start(); err != nil {
		t.Fatalf("start child %s: %v", spec.Role, err)
	}
	t.Cleanup(c.kill)
	return c
}

// line reads the child's next line of output, failing t after timeout.
func (c *child) line(t *testing.T, timeout time.Duration) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		s, _ := c.stdout.ReadString('\n')
		got <- strings.TrimSpace(s)
	}()
	select {
	case s := <-got:
		return s
	case <-time.After(timeout):
		c.kill()
		<-got
		t.Fatalf("child printed nothing within %s; stderr:\n%s", timeout, c.stderr.String())
		return ""
	}
}

// wait waits for the child to finish its work and exit cleanly.
func (c *child) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	_ = c.stdin.Close()
	var last string
	read := make(chan struct{})
	go func() {
		defer close(read)
		for {
			s, err := c.stdout.ReadString('\n')
			if s = strings.TrimSpace(s); s != "" {
				last = s
			}
			if err != nil {
				return
			}
		}
	}()
	select {
	case <-read:
	case <-time.After(timeout):
		c.kill()
		<-read
		t.Fatalf("child still running after %s; stderr:\n%s", timeout, c.stderr.String())
	}
	err := c.cmd.Wait()
	if err != nil || last != childOK {
		t.Fatalf("child failed (exit: %v, last line %q; is TestMain dlocktest.Main?); stderr:\n%s", err, last, c.stderr.String())
	}
}

// kill SIGKILLs the child if it is still running and reaps it.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.cmd.Wait()
}
