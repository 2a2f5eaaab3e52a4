package mysqllock_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/mysqllock"
)

// envWaiter makes the test binary a waiting client: "URL\tNAME\tWAIT".
const envWaiter = "MYSQLLOCK_TEST_WAITER"

// waiterMain opens URL and waits for NAME up to WAIT, printing
// "waiting" first and the outcome after.
func waiterMain(spec string) int {
	parts := strings.Split(spec, "\t")
	wait, _ := time.ParseDuration(parts[2])
	l, err := dlock.Open(context.Background(), parts[0])
	if err != nil {
		fmt.Println("open:", err)
		return 1
	}
	defer l.Close()
	fmt.Println("waiting")
	lease, err := l.Acquire(context.Background(), parts[1], dlock.WithWait(wait))
	if err != nil {
		fmt.Println("gave up:", err)
		return 0
	}
	fmt.Println("acquired")
	_ = lease.Release(context.Background())
	return 0
}

// TestGetLockWaiterThatGaveUpNeverKeepsTheLock: a client waiting in
// GET_LOCK whose process is stopped (SIGSTOP: it can neither close its
// connection nor see its deadline) stops waiting in the server at its
// deadline, so the lock released after that goes to whoever asks, not to
// the stopped process.
func TestGetLockWaiterThatGaveUpNeverKeepsTheLock(t *testing.T) {
	d := newDB(t)
	cfg := mysqllock.Config{Mode: mysqllock.GetLock}
	holder := d.locker(t, cfg)
	const name, wait = "frozen-waiter", 2 * time.Second
	lease, err := holder.TryAcquire(ctx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWaiter+"="+d.url+"?mode=get_lock\t"+name+"\t"+wait.String())
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
	other := d.locker(t, cfg)
	got, err := other.Acquire(ctx(t), name, dlock.WithWait(10*time.Second))
	if err != nil {
		t.Fatalf("the lock released %s after a stopped waiter's deadline was not free: %v", time.Since(stopped), err)
	}
	_ = got.Release(ctx(t))
}

// waitForGetLockWaiter waits until a connection waits in GET_LOCK.
func (d *db) waitForGetLockWaiter(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		if err := d.sql.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM information_schema.processlist
			WHERE (info LIKE 'SELECT GET_LOCK(%' OR info LIKE 'SELECT IF(GET_LOCK(%' OR info LIKE 'DO @dlock_t0 := %, GET_LOCK(%')
				AND state LIKE '%lock%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no connection waits in GET_LOCK")
}
