package benchwork

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
)

// leaderStart bounds how long a failover round waits for its leader
// process to be elected.
const leaderStart = 30 * time.Second

// Failover is the leader-failover workload: a leader process is elected,
// this process campaigns behind it, the leader is killed with SIGKILL, and
// the wait from the kill to this campaign's election (the new term) is
// timed.
type Failover struct {
	// Election is the election every round runs on.
	Election *dlock.Election
	// Leader returns the command of a process that campaigns on Election
	// with leases of TTL, publishing value (it is its Owner), and leads
	// until it is killed; the round sets its Stderr, for the error when it
	// exits before it leads. It should die with this process (on Linux,
	// SysProcAttr.Pdeathsig), so that an interrupted run leaves no leader.
	Leader func(value string) *exec.Cmd
	// TTL is the leader's lease TTL: the kill lands anywhere in its
	// refresh period (TTL/3), and a round gives up after 3 TTLs plus a
	// minute.
	TTL time.Duration
}

// FailoverRound is one round's measurement.
type FailoverRound struct {
	Took time.Duration // from the kill to the new term
	Left time.Duration // on the old term's lease at the kill; negative if unknown
	Term uint64
	TTL  time.Duration // the new term's
}

// Round runs one failover; round numbers the leader's published value.
func (f Failover) Round(ctx context.Context, round int) (FailoverRound, error) {
	value := fmt.Sprintf("dlock-bench-leader-%d", round)
	leader, err := startLeader(f.Leader(value))
	if err != nil {
		return FailoverRound{}, err
	}
	defer leader.stop()
	if _, err := leader.elected(ctx, f.Election, value); err != nil {
		return FailoverRound{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 3*f.TTL+time.Minute)
	defer cancel()
	done := make(chan termWon, 1)
	go func() {
		ls, err := f.Election.Campaign(cctx, "dlock-bench-standby")
		done <- termWon{ls, time.Now(), err}
	}()
	// The standby is waiting, as followers do, and the kill lands anywhere
	// in the leader's refresh period (TTL/3).
	time.Sleep(100*time.Millisecond + rand.N(f.TTL/3))
	old, _, err := f.Election.Leader(ctx)
	if err != nil {
		return FailoverRound{}, err
	}
	killed := time.Now()
	leader.kill()
	return (<-done).round(ctx, old, killed)
}

// termWon is the outcome of the standby's Campaign.
type termWon struct {
	ls  *dlock.Lease
	at  time.Time
	err error
}

// round checks the new term against the old and resigns it.
func (w termWon) round(ctx context.Context, old dlock.Holder, killed time.Time) (FailoverRound, error) {
	if w.err != nil {
		return FailoverRound{}, w.err
	}
	defer w.ls.Release(context.WithoutCancel(ctx))
	if w.ls.Fence() <= old.Fence {
		return FailoverRound{}, fmt.Errorf("new term %d after term %d: terms must increase", w.ls.Fence(), old.Fence)
	}
	return FailoverRound{Took: w.at.Sub(killed), Left: old.TTL, Term: w.ls.Fence(), TTL: w.ls.TTL()}, nil
}

// leaderProc is a running leader process.
type leaderProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
}

// startLeader starts cmd and reaps it when it ends.
func startLeader(cmd *exec.Cmd) (*leaderProc, error) {
	p := &leaderProc{cmd: cmd, done: make(chan struct{})}
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start leader: %w", err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	return p, nil
}

// elected waits until the process leads the election, publishing value,
// and returns its term.
func (p *leaderProc) elected(ctx context.Context, el *dlock.Election, value string) (dlock.Holder, error) {
	deadline := time.Now().Add(leaderStart)
	for {
		h, ok, err := el.Leader(ctx)
		switch {
		case errors.Is(err, dlock.ErrUnsupported):
			return h, fmt.Errorf("%w: bench --election watches the leader, which needs a backend that lists holders", err)
		case err != nil:
			return h, err
		case ok && h.Owner == value:
			return h, nil
		case time.Now().After(deadline):
			return h, fmt.Errorf("the leader process was not elected within %s", leaderStart)
		}
		select {
		case <-p.done:
			return h, fmt.Errorf("the leader process exited before it was elected: %s", strings.TrimSpace(p.stderr.String()))
		case <-ctx.Done():
			return h, ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// kill sends SIGKILL to the leader and waits for it to end.
func (p *leaderProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// stop kills the leader if it still runs.
func (p *leaderProc) stop() {
	select {
	case <-p.done:
	default:
		p.kill()
	}
}
