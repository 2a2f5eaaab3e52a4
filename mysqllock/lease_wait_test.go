package mysqllock_test

import (
	"bufio"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/mysqllock"
)

// TestLeaseWaitersServedInOrder: waiters that came one after another get
// the lock in that order, and a waiter whose process is killed in the
// queue gives up its place: the waiters behind it are still served, in
// order, and long before the holders' 30 s TTL would have lapsed.
func TestLeaseWaitersServedInOrder(t *testing.T) {
	d := newDB(t)
	const name, ttl = "in-order", 30 * time.Second
	opts := []dlock.Option{dlock.WithTTL(ttl), dlock.WithWait(time.Minute)}
	holder, err := d.locker(t, mysqllock.Config{}).Acquire(ctx(t), name, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	var doomed *exec.Cmd
	for i := range 4 {
		if i == 2 {
			doomed = queuedProcess(t, d, name)
		}
		l := d.locker(t, mysqllock.Config{})
		wg.Go(func() {
			lease, err := l.Acquire(ctx(t), name, opts...)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond)
			if err := lease.Release(ctx(t)); err != nil {
				t.Errorf("waiter %d: release: %v", i, err)
			}
		})
		time.Sleep(300 * time.Millisecond) // let waiter i queue before the next
	}
	if err := doomed.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	released := time.Now()
	if err := holder.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	took := time.Since(released)
	if !slices.Equal(order, []int{0, 1, 2, 3}) {
		t.Errorf("waiters got the lock in order %v, want [0 1 2 3] (first come, first served)", order)
	}
	if took > ttl/2 {
		t.Errorf("the four waiters took %s after the release, with a killed waiter queued among them: the queue stalled", took)
	}
	t.Logf("four waiters served %s after the release, a killed waiter queued among them", took.Round(time.Millisecond))
}

// queuedProcess starts a client process that waits for name in lease
// mode, and returns once it waits.
func queuedProcess(t *testing.T, d *db, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWaiter+"="+d.url+"\t"+name+"\t1m")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "waiting" {
		t.Fatalf("waiter process said %q", lines.Text())
	}
	time.Sleep(300 * time.Millisecond) // "waiting" comes just before the Acquire
	return cmd
}

// TestLeaseWaiterThatGaveUpNeverKeepsTheLock: a lease-mode waiter whose
// process is stopped while it waits in the server for the wake key stops
// waiting at its deadline, so the lock released after that goes to
// whoever asks, not to the stopped process.
func TestLeaseWaiterThatGaveUpNeverKeepsTheLock(t *testing.T) {
	d := newDB(t)
	const name, wait = "frozen-lease-waiter", 2 * time.Second
	lease, err := d.locker(t, mysqllock.Config{}).TryAcquire(ctx(t), name, dlock.WithTTL(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWaiter+"="+d.url+"\t"+name+"\t"+wait.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	if lines := bufio.NewScanner(out); !lines.Scan() || lines.Text() != "waiting" {
		t.Fatalf("waiter said %q", lines.Text())
	}
	d.waitForGetLockWaiter(t)
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	time.Sleep(wait + time.Second) // past the waiter's deadline, which it cannot see
	if err := lease.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	got, err := d.locker(t, mysqllock.Config{}).Acquire(ctx(t), name, dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("the lock released %s after a stopped waiter's deadline was not free: %v", time.Since(stopped), err)
	}
	_ = got.Release(ctx(t))
}
