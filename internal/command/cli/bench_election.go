package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/command/benchreport"
	"github.com/dlockdev/dlock/internal/command/benchwork"
)

// failoverRound is one round's measurement.
type failoverRound struct {
	took time.Duration // from the kill to the new term
	left time.Duration // on the old term's lease at the kill; negative if unknown
	term uint64
	ttl  time.Duration // the new term's
}

// leaderStart bounds how long a round waits for its leader process to be
// elected.
const leaderStart = 30 * time.Second

// runBenchElection measures opts.Rounds failovers of one election.
func runBenchElection(ctx context.Context, opts *benchOptions, std *IO) error {
	exe, err := benchExe(opts)
	if err != nil {
		return err
	}
	l, err := openLocker(ctx, opts.URL, dlock.WithTTL(opts.TTL))
	if err != nil {
		return err
	}
	defer l.Close()
	el, err := l.Election("dlock-bench/" + randomHex(4) + "/leader")
	if err != nil {
		return err
	}
	var rounds []failoverRound
	for i := range opts.Rounds {
		fr, err := failover(ctx, el, exe, opts, i)
		if err != nil {
			return fmt.Errorf("bench --election, round %d: %w", i+1, err)
		}
		fmt.Fprintf(std.Err, "round %d/%d: term %d began %s after the leader's SIGKILL\n", i+1, opts.Rounds, fr.term, fr.took.Round(time.Millisecond))
		rounds = append(rounds, fr)
	}
	r := summarizeFailovers(rounds)
	r.Backend = l.Backend()
	if opts.JSON {
		return writeJSONLine(std.Out, r)
	}
	return writeElectionTable(std, r)
}

// summarizeFailovers turns the rounds into the result.
func summarizeFailovers(rounds []failoverRound) benchreport.Election {
	r := benchreport.Election{Workload: "election-failover", Rounds: len(rounds)}
	var took, past []time.Duration
	for _, fr := range rounds {
		took, r.TTLSeconds = append(took, fr.took), fr.ttl.Seconds()
		r.FailoverMs = append(r.FailoverMs, msOf(fr.took))
		if fr.left >= 0 {
			r.LeftMs, past = append(r.LeftMs, msOf(fr.left)), append(past, fr.took-fr.left)
		}
	}
	r.MinMs, r.P50Ms, r.MaxMs = msOf(benchwork.Percentile(took, 0)), msOf(benchwork.Percentile(took, 50)), msOf(benchwork.Percentile(took, 100))
	if r.TTLSeconds > 0 {
		r.P50OverTTL = r.P50Ms / 1000 / r.TTLSeconds
	}
	if len(past) == len(rounds) && len(past) > 0 {
		p := msOf(benchwork.Percentile(past, 50))
		r.PastExpiryP50Ms = &p
	}
	return r
}

// benchExe is the dlock binary that runs the leaders.
func benchExe(opts *benchOptions) (string, error) {
	if opts.Exe != "" {
		return opts.Exe, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("bench --election: cannot find this executable to start leaders: %w", err)
	}
	return exe, nil
}

// failover runs one round: a `dlock elect` process becomes leader, this
// process campaigns behind it, the leader is SIGKILLed, and the wait from
// the kill to this campaign's election is timed.
func failover(ctx context.Context, el *dlock.Election, exe string, opts *benchOptions, round int) (failoverRound, error) {
	value := fmt.Sprintf("dlock-bench-leader-%d", round)
	leader, err := startLeader(exe, opts, el.Name(), value)
	if err != nil {
		return failoverRound{}, err
	}
	defer leader.stop()
	if _, err := leader.elected(ctx, el, value); err != nil {
		return failoverRound{}, err
	}
	cctx, cancel := context.WithTimeout(ctx, 3*opts.TTL+time.Minute)
	defer cancel()
	done := make(chan termWon, 1)
	go func() {
		ls, err := el.Campaign(cctx, "dlock-bench-standby")
		done <- termWon{ls, time.Now(), err}
	}()
	// The standby is waiting, as followers do, and the kill lands anywhere
	// in the leader's refresh period (TTL/3).
	time.Sleep(100*time.Millisecond + rand.N(opts.TTL/3))
	old, _, err := el.Leader(ctx)
	if err != nil {
		return failoverRound{}, err
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
func (w termWon) round(ctx context.Context, old dlock.Holder, killed time.Time) (failoverRound, error) {
	if w.err != nil {
		return failoverRound{}, w.err
	}
	defer w.ls.Release(context.WithoutCancel(ctx))
	if w.ls.Fence() <= old.Fence {
		return failoverRound{}, fmt.Errorf("new term %d after term %d: terms must increase", w.ls.Fence(), old.Fence)
	}
	return failoverRound{took: w.at.Sub(killed), left: old.TTL, term: w.ls.Fence(), ttl: w.ls.TTL()}, nil
}

// leaderProc is a `dlock elect NAME -- sleep` process.
type leaderProc struct {
	cmd    *exec.Cmd
	stderr bytes.Buffer
	done   chan struct{}
}

// startLeader starts `dlock elect` on the bench's backend: by $DLOCK_URL,
// never on its command line, which every user can read (ps).
func startLeader(exe string, opts *benchOptions, name, value string) (*leaderProc, error) {
	p := &leaderProc{done: make(chan struct{})}
	p.cmd = exec.Command(exe, "elect", "--ttl", opts.TTL.String(), "--value", value, name, "--", "sleep", "1000")
	p.cmd.Env = os.Environ()
	if opts.URL != "" { // the last of duplicate keys wins (os/exec)
		p.cmd.Env = append(p.cmd.Env, dlock.EnvURL+"="+opts.URL)
	}
	p.cmd.Stderr = &p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
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
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
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

func writeElectionTable(std *IO, r benchreport.Election) error {
	tw := tabwriter.NewWriter(std.Out, 0, 4, 2, ' ', tabwriter.AlignRight)
	past := "n/a"
	if r.PastExpiryP50Ms != nil {
		past = fmt.Sprintf("%.0f", *r.PastExpiryP50Ms)
	}
	fmt.Fprintln(tw, "WORKLOAD\tROUNDS\tTTL S\tMIN S\tP50 S\tMAX S\tP50/TTL\tPAST EXPIRY P50 MS\t")
	fmt.Fprintf(tw, "%s\t%d\t%.2f\t%.3f\t%.3f\t%.3f\t%.2f\t%s\t\n", r.Workload, r.Rounds, r.TTLSeconds,
		r.MinMs/1000, r.P50Ms/1000, r.MaxMs/1000, r.P50OverTTL, past)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(std.Out, "From the SIGKILL of a `dlock elect` leader process to the return of the Campaign waiting behind it.")
	fmt.Fprintln(std.Out, "PAST EXPIRY: that time minus what was left on the leader's lease at the kill (n/a: a lease without a TTL).")
	return nil
}
