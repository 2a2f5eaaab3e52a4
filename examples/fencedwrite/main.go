// Command fencedwrite shows why a lock needs fencing: a holder paused past its
// TTL resumes and writes, and the resource rejects the stale write.
//
//	fencedwrite -url redis://localhost:6379 -db postgres://localhost/app -value "from A" -gate
//
// It takes the lock (auto-refresh off, so the lease simply expires while
// the process is stopped), prints "acquired fence=N", optionally waits for
// a line on stdin (-gate), then writes its value to a Postgres row through
// pgfence. A rejected write prints "rejected: ..." and exits 3.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/fence"
	"github.com/dlockdev/dlock/fence/pgfence"
	_ "github.com/dlockdev/dlock/filelock"
	_ "github.com/dlockdev/dlock/pglock"
	_ "github.com/dlockdev/dlock/redislock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// exitStale is the exit code of a rejected write.
const exitStale = 3

type options struct {
	lockURL, dbURL, name, value string
	ttl                         time.Duration
	gate                        bool
}

func main() {
	var o options
	fs := flag.NewFlagSet("fencedwrite", flag.ExitOnError)
	fs.StringVar(&o.lockURL, "url", "", "lock backend URL (default $DLOCK_URL)")
	fs.StringVar(&o.dbURL, "db", os.Getenv("DATABASE_URL"), "Postgres URL of the resource (default $DATABASE_URL)")
	fs.StringVar(&o.name, "name", "account-42", "lock name and row key")
	fs.StringVar(&o.value, "value", "hello", "value to write")
	fs.DurationVar(&o.ttl, "ttl", 2*time.Second, "lease TTL (not refreshed)")
	fs.BoolVar(&o.gate, "gate", false, "wait for a line on stdin before writing")
	_ = fs.Parse(os.Args[1:])
	os.Exit(run(context.Background(), o, os.Stdin, os.Stdout))
}

// docs is the fenced resource: one row per key, with its fence beside it.
var docs = pgfence.Table{Name: "fenced_docs", Key: "id"}

func run(ctx context.Context, o options, in io.Reader, out io.Writer) int {
	if err := write(ctx, o, in, out); err != nil {
		if errors.Is(err, fence.ErrStale) {
			fmt.Fprintln(out, "rejected:", err)
			return exitStale
		}
		fmt.Fprintln(os.Stderr, "fencedwrite:", err)
		return 1
	}
	return 0
}

func write(ctx context.Context, o options, in io.Reader, out io.Writer) error {
	pool, err := pgxpool.New(ctx, o.dbURL)
	if err != nil {
		return err
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS fenced_docs (id text PRIMARY KEY, fence bigint NOT NULL, body text)`); err != nil {
		return err
	}
	locker, err := dlock.Open(ctx, o.lockURL, dlock.WithTTL(o.ttl), dlock.WithAutoRefresh(false))
	if err != nil {
		return err
	}
	defer locker.Close()
	lease, err := locker.Acquire(ctx, o.name)
	if err != nil {
		return err
	}
	defer lease.Release(context.Background())
	fmt.Fprintf(out, "acquired fence=%d\n", lease.Fence())
	if o.gate {
		// A real holder would be doing work here; the test stops the
		// process (SIGSTOP) at this point. Note that this program does
		// not look at lease.Err() before writing: it believes it holds
		// the lock, as a paused process does.
		_, _ = bufio.NewReader(in).ReadString('\n')
	}
	if err := docs.Upsert(ctx, pool, o.name, lease.Fence(), pgfence.Values{"body": o.value}); err != nil {
		return err
	}
	fmt.Fprintf(out, "wrote fence=%d\n", lease.Fence())
	return nil
}
