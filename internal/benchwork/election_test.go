package benchwork_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/filelock"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// Environment of a leader process: this test binary, started again.
const (
	envLeaderURL   = "BENCHWORK_LEADER_URL"
	envLeaderName  = "BENCHWORK_LEADER_ELECTION"
	envLeaderValue = "BENCHWORK_LEADER_VALUE"
)

// leaderMain, in a process started by leaderCmd, campaigns and leads
// until it is killed.
func leaderMain() {
	ctx := context.Background()
	l, err := dlock.Open(ctx, os.Getenv(envLeaderURL), dlock.WithTTL(time.Second))
	if err != nil {
		panic(err)
	}
	el, err := l.Election(os.Getenv(envLeaderName))
	if err != nil {
		panic(err)
	}
	if _, err := el.Campaign(ctx, os.Getenv(envLeaderValue)); err != nil {
		panic(err)
	}
	select {}
}

func leaderCmd(url, name string) func(value string) *exec.Cmd {
	return func(value string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envLeaderURL+"="+url, envLeaderName+"="+name, envLeaderValue+"="+value)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
	}
}

// TestFailover: two rounds on the file backend, each killing a leader
// process; every new term is above the killed one's, and the round saw
// what was left of the killed lease (no wall-clock bound: the machine is
// shared).
func TestFailover(t *testing.T) {
	url := "file://" + filepath.Join(t.TempDir(), "locks.db")
	l, err := dlock.Open(context.Background(), url, dlock.WithTTL(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	el, err := l.Election("bench/leader")
	if err != nil {
		t.Fatal(err)
	}
	f := benchwork.Failover{Election: el, TTL: time.Second, Leader: leaderCmd(url, el.Name())}
	var last uint64
	for i := range 2 {
		r, err := f.Round(context.Background(), i)
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if r.Term <= last || r.Took <= 0 || r.Left < 0 || r.TTL != time.Second {
			t.Errorf("round %d: %+v after term %d", i, r, last)
		}
		last = r.Term
	}
}

// TestFailoverLeaderExits: a leader process that exits before it leads
// fails the round with what it printed on stderr.
func TestFailoverLeaderExits(t *testing.T) {
	l, err := dlock.Open(context.Background(), "file://"+filepath.Join(t.TempDir(), "locks.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	el, err := l.Election("bench/leader")
	if err != nil {
		t.Fatal(err)
	}
	f := benchwork.Failover{Election: el, TTL: time.Second, Leader: func(string) *exec.Cmd {
		return exec.Command("sh", "-c", "echo cannot reach the backend >&2; exit 3")
	}}
	_, err = f.Round(context.Background(), 0)
	if err == nil || !strings.Contains(err.Error(), "exited before it was elected: cannot reach the backend") {
		t.Fatalf("Round with a leader that exits: %v", err)
	}
}
