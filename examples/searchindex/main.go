// Command searchindex is an efficiency lock around a long job: rebuilding a
// product-search index, a minutes-long job that must not run twice at once
// across a fleet, must survive a crash mid-way, and can be started by a
// schedule or by an administrator.
//
//	searchindex setup -products 200       create products and an empty live index
//	searchindex rebuild [-slow 200ms]     rebuild now (from cron); exit 75 if one is running
//	searchindex serve -addr :8080         admin API: POST /rebuild
//
// It is an EFFICIENCY lock: a second concurrent rebuild would waste work,
// but cannot corrupt the live index, because every rebuild writes a
// uniquely named table and promotes it with an atomic rename. So a plain
// dlock lease with its watchdog is enough; no fencing is needed.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/filelock"
	_ "github.com/dlockdev/dlock/pglock"
	_ "github.com/dlockdev/dlock/redislock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// exitHeld is the exit code of `rebuild` when another rebuild is running
// (the dlock CLI's code for "held elsewhere").
const exitHeld = 75

type options struct {
	cmd      string
	dbURL    string
	lockURL  string
	addr     string
	owner    string
	products int
	slow     time.Duration
	ttl      time.Duration
	wait     time.Duration
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: searchindex setup|rebuild|serve [flags]")
		os.Exit(2)
	}
	host, _ := os.Hostname()
	o := options{cmd: os.Args[1]}
	fs := flag.NewFlagSet("searchindex "+o.cmd, flag.ExitOnError)
	fs.StringVar(&o.dbURL, "db", os.Getenv("DATABASE_URL"), "Postgres URL (default $DATABASE_URL)")
	fs.StringVar(&o.lockURL, "url", "", "dlock URL (default $DLOCK_URL)")
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "serve: listen address")
	fs.StringVar(&o.owner, "owner", fmt.Sprintf("searchindex %s/%d", host, os.Getpid()), "holder description")
	fs.IntVar(&o.products, "products", 200, "setup: number of products")
	fs.DurationVar(&o.slow, "slow", 0, "sleep per batch of 10 products, to make the rebuild long")
	fs.DurationVar(&o.ttl, "ttl", 10*time.Second, "lock TTL; the watchdog refreshes it every TTL/3")
	fs.DurationVar(&o.wait, "wait", 0, "rebuild: how long to wait for a running rebuild (0: fail fast)")
	_ = fs.Parse(os.Args[2:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(run(ctx, o, os.Stdout))
}

func run(ctx context.Context, o options, out io.Writer) int {
	db, err := pgxpool.New(ctx, o.dbURL)
	if err != nil {
		fmt.Fprintln(os.Stderr, "searchindex:", err)
		return 1
	}
	defer db.Close()
	if o.cmd == "setup" {
		return exit(setup(ctx, db, o.products))
	}
	locker, err := dlock.Open(ctx, o.lockURL, dlock.WithTTL(o.ttl), dlock.WithOwner(o.owner))
	if err != nil {
		return exit(err)
	}
	defer locker.Close()
	r := &rebuilder{db: db, locker: locker, slow: o.slow, out: out}
	switch o.cmd {
	case "rebuild":
		return r.once(ctx, o.wait)
	case "serve":
		return exit(serve(ctx, o.addr, r, out))
	}
	fmt.Fprintf(os.Stderr, "searchindex: unknown command %q\n", o.cmd)
	return 2
}

func exit(err error) int {
	if err != nil {
		fmt.Fprintln(os.Stderr, "searchindex:", err)
		return 1
	}
	return 0
}
