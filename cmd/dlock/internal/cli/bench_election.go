package cli

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/cmd/dlock/internal/benchreport"
	"github.com/dlockdev/dlock/internal/benchwork"
)

// runBenchElection measures opts.Rounds failovers of one election
// (benchwork.Failover), each leader a `dlock elect` process.
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
	f := benchwork.Failover{Election: el, TTL: opts.TTL, Leader: leaderCommand(exe, opts, el.Name())}
	var rounds []benchwork.FailoverRound
	for i := range opts.Rounds {
		fr, err := f.Round(ctx, i)
		if err != nil {
			return fmt.Errorf("bench --election, round %d: %w", i+1, err)
		}
		fmt.Fprintf(std.Err, "round %d/%d: term %d began %s after the leader's SIGKILL\n", i+1, opts.Rounds, fr.Term, fr.Took.Round(time.Millisecond))
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
func summarizeFailovers(rounds []benchwork.FailoverRound) benchreport.Election {
	r := benchreport.Election{Workload: "election-failover", Rounds: len(rounds)}
	var took, past []time.Duration
	for _, fr := range rounds {
		took, r.TTLSeconds = append(took, fr.Took), fr.TTL.Seconds()
		r.FailoverMs = append(r.FailoverMs, msOf(fr.Took))
		if fr.Left >= 0 {
			r.LeftMs, past = append(r.LeftMs, msOf(fr.Left)), append(past, fr.Took-fr.Left)
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

// leaderCommand makes the leaders: `dlock elect NAME -- sleep` on the
// bench's backend, named by $DLOCK_URL, never on the command line, which
// every user can read (ps); a leader dies with this process.
func leaderCommand(exe string, opts *benchOptions, name string) func(value string) *exec.Cmd {
	return func(value string) *exec.Cmd {
		cmd := exec.Command(exe, "elect", "--ttl", opts.TTL.String(), "--value", value, name, "--", "sleep", "1000")
		cmd.Env = os.Environ()
		if opts.URL != "" { // the last of duplicate keys wins (os/exec)
			cmd.Env = append(cmd.Env, dlock.EnvURL+"="+opts.URL)
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		return cmd
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
