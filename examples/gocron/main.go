// Command gocron runs go-co-op/gocron schedulers on two "hosts", host-a and
// host-b, that share one dlock backend, through package gocronlock:
//
//	gocron [-url file:///tmp/dlock.db] [-slots 4] [-splay 300ms] [-ticks 3]
//
// First, once per slot: both schedulers run the same every-second job,
// host-b's firing -splay after host-a's, with a gocronlock.Locker. Each
// slot runs once: host-a runs it, and host-b, arriving later for the same
// slot, skips it and says who ran it. The run ledger is printed at the
// end. Then, leader only: both schedulers run a job every 200 ms with a
// gocronlock.Elector; only the leader's runs, until the leader's dlock
// Locker closes and the other host takes over.
//
// Each host has its own dlock.Locker, as separate machines would. The
// default backend is a new SQLite file in a temporary directory; any dlock
// URL another host could reach works (redis://, postgres://, etcd://...).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

type options struct {
	url   string
	slots int
	splay time.Duration
	ticks int
}

func main() {
	var o options
	fs := flag.NewFlagSet("gocron", flag.ExitOnError)
	fs.StringVar(&o.url, "url", os.Getenv("DLOCK_URL"), "dlock backend URL (default $DLOCK_URL, else a new file in a temporary directory)")
	fs.IntVar(&o.slots, "slots", 4, "slots of the every-second job to run, 1 to 100")
	fs.DurationVar(&o.splay, "splay", 300*time.Millisecond, "how much later host-b's scheduler fires than host-a's, 0 to 499ms")
	fs.IntVar(&o.ticks, "ticks", 3, "runs of the leader-only job before, and after, the leader's Locker closes, 1 to 100")
	_ = fs.Parse(os.Args[1:])
	os.Exit(run(context.Background(), o, os.Stdout, os.Stderr))
}

// run runs both demonstrations: exit code 0, 1 when one fails, 2 for bad
// options.
func run(ctx context.Context, o options, stdout, stderr io.Writer) int {
	if err := o.check(); err != nil {
		fmt.Fprintln(stderr, "gocron:", err)
		return 2
	}
	url, cleanup, err := backendURL(o.url)
	if err != nil {
		fmt.Fprintln(stderr, "gocron:", err)
		return 1
	}
	defer cleanup()
	// A bound, so that a backend that stops answering ends the program.
	ctx, cancel := context.WithTimeout(ctx, time.Duration(o.slots+2*o.ticks)*time.Second+time.Minute)
	defer cancel()
	out := &printer{w: stdout}
	if err := onceEachSlot(ctx, url, o, out); err != nil {
		fmt.Fprintln(stderr, "gocron: once per slot:", err)
		return 1
	}
	if err := leaderOnly(ctx, url, o, out); err != nil {
		fmt.Fprintln(stderr, "gocron: leader only:", err)
		return 1
	}
	return 0
}

func (o options) check() error {
	switch {
	case o.slots < 1 || o.slots > 100:
		return fmt.Errorf("-slots %d: want 1 to 100", o.slots)
	case o.splay < 0 || o.splay >= 500*time.Millisecond:
		return fmt.Errorf("-splay %s: want 0 to 499ms, under half the job's 1s period, so both hosts name the same slot", o.splay)
	case o.ticks < 1 || o.ticks > 100:
		return fmt.Errorf("-ticks %d: want 1 to 100", o.ticks)
	}
	return nil
}

// backendURL returns url, or else the URL of a new SQLite file in a
// temporary directory, which cleanup removes.
func backendURL(url string) (string, func(), error) {
	if url != "" {
		return url, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "dlock-gocron-")
	if err != nil {
		return "", nil, err
	}
	return "file://" + filepath.Join(dir, "dlock.db"), func() { os.RemoveAll(dir) }, nil
}

// printer writes one line at a time from the schedulers' goroutines,
// each stamped with the time (UTC, milliseconds).
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) say(who, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%s  %-6s  %s\n", time.Now().UTC().Format("15:04:05.000"), who, fmt.Sprintf(format, args...))
}
