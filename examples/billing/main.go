// Command billing is the nightly billing cron that charged customers
// twice. It runs on two hosts, in two versions:
//
//	billing setup  -subs 10                    create tables and subscriptions
//	billing naive  -host A -period 2027-01     SET lock NX EX, charge all, plain DEL
//	billing fixed  -host A -period 2027-01     dlock lease + fenced writes + idempotency keys
//	billing report -period 2027-01             charges per subscription, double charges
//
// Both versions take -pause-after K -pause D: after claiming the K-th
// subscription the host sleeps for D, standing in for a GC pause or a
// throttled container. With D longer than the lock's TTL the naive version
// double-charges; the fixed one charges every subscription exactly once.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	_ "github.com/dlockdev/dlock/filelock"
	_ "github.com/dlockdev/dlock/pglock"
	_ "github.com/dlockdev/dlock/redislock"
)

type options struct {
	cmd        string
	dbURL      string
	redisURL   string // naive lock
	lockURL    string // fixed lock (dlock URL)
	host       string
	period     string
	subs       int
	ttl        time.Duration
	pause      time.Duration
	pauseAfter int
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: billing setup|naive|fixed|report [flags]")
		os.Exit(2)
	}
	o := options{cmd: os.Args[1]}
	fs := flag.NewFlagSet("billing "+o.cmd, flag.ExitOnError)
	fs.StringVar(&o.dbURL, "db", os.Getenv("DATABASE_URL"), "Postgres URL (default $DATABASE_URL)")
	fs.StringVar(&o.redisURL, "redis", os.Getenv("REDIS_URL"), "Redis URL of the naive lock (default $REDIS_URL)")
	fs.StringVar(&o.lockURL, "url", "", "dlock URL of the fixed version's lock (default $DLOCK_URL)")
	fs.StringVar(&o.host, "host", "A", "this host's name, recorded on each charge")
	fs.StringVar(&o.period, "period", time.Now().Format("2006-01"), "billing period")
	fs.IntVar(&o.subs, "subs", 10, "setup: number of subscriptions")
	fs.DurationVar(&o.ttl, "ttl", time.Second, "lock TTL")
	fs.DurationVar(&o.pause, "pause", 0, "injected pause")
	fs.IntVar(&o.pauseAfter, "pause-after", 3, "pause after claiming this many subscriptions")
	_ = fs.Parse(os.Args[2:])
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "billing %s: %v\n", o.cmd, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	db, err := connect(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer db.Close()
	switch o.cmd {
	case "setup":
		return setup(ctx, db, o.subs)
	case "naive":
		return naive(ctx, db, o, out)
	case "fixed":
		return fixed(ctx, db, o, out)
	case "report":
		return report(ctx, db, o.period, out)
	}
	return fmt.Errorf("unknown command %q (want setup, naive, fixed or report)", o.cmd)
}

// pauseAt injects the pause before the k-th (1-based) subscription's
// charge when k == pause-after.
func pauseAt(o options, k int, out io.Writer) {
	if o.pause > 0 && k == o.pauseAfter {
		fmt.Fprintf(out, "pausing %s after claiming subscription #%d\n", o.pause, k)
		time.Sleep(o.pause)
		fmt.Fprintln(out, "resumed")
	}
}
