package demo

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock"
)

// env is the state of one `dlock demo` run: the backend, the temporary
// directory, and the worker processes of the current scenario.
type env struct {
	opts   *Options
	out    io.Writer // the timeline and verdicts
	errOut io.Writer // notes
	exe    string
	root   string // temporary directory of the run
	url    string
	ttl    time.Duration // effective short TTL
	wttl   time.Duration // effective watchdog TTL
	locker *dlock.Locker // the demo's own view of the backend
	runID  string

	dir   string // the current scenario's directory
	start time.Time
	res   *sql.DB // the current scenario's resource database

	mu    sync.Mutex // serialises output
	procs []*proc
}

func newEnv(ctx context.Context, opts *Options, out, errOut io.Writer) (*env, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("demo: cannot find this executable to start workers: %w", err)
	}
	root, err := demoDir()
	if err != nil {
		return nil, err
	}
	e := &env{opts: opts, out: out, errOut: errOut, exe: exe, root: root, url: opts.URL, runID: randomHex(3)}
	if e.url == "" {
		e.url = "file://" + filepath.Join(root, "locks.db")
	}
	if strings.HasPrefix(e.url, "mem:") {
		os.RemoveAll(root)
		return nil, usageErr("demo needs a backend shared by separate processes; mem:// lives inside one process")
	}
	if e.locker, err = openLocker(ctx, e.url); err != nil {
		os.RemoveAll(root)
		return nil, err
	}
	if err := migrate(ctx, e.locker); err != nil {
		e.close()
		return nil, err
	}
	e.ttl, e.wttl = e.backendTTL(opts.TTL), e.backendTTL(opts.WatchdogTTL)
	return e, nil
}

// backendTTL raises ttl to what the backend can honour.
func (e *env) backendTTL(ttl time.Duration) time.Duration {
	caps := e.locker.Capabilities()
	ttl = max(ttl, caps.MinTTL)
	if g := caps.TTLGranularity; g > 0 && ttl%g != 0 {
		ttl = (ttl/g + 1) * g
	}
	return ttl
}

func (e *env) close() {
	e.killAll()
	if e.res != nil {
		e.res.Close()
	}
	e.locker.Close()
	if e.opts.Keep {
		fmt.Fprintf(e.errOut, "demo files kept in %s\n", e.root)
		return
	}
	os.RemoveAll(e.root)
}

// begin prepares a scenario: its directory, resource database and header.
func (e *env) begin(s scenario) {
	e.dir = filepath.Join(e.root, s.name)
	if e.res != nil {
		e.res.Close()
		e.res = nil
	}
	fmt.Fprintf(e.out, "== %s: %s ==\n", s.name, s.title)
	fmt.Fprintf(e.out, "backend %s\n", dlock.Redact(e.url))
	e.start = time.Now()
}

// resource opens (creating) the scenario's resource database.
func (e *env) resource(sub string) (*sql.DB, error) {
	dir := filepath.Join(e.dir, sub)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	db, err := openResource(dir)
	if err != nil {
		return nil, err
	}
	if e.res != nil {
		e.res.Close()
	}
	e.res = db
	return db, nil
}

// lockName is name made unique to this run.
func (e *env) lockName(name string) string { return "dlock-demo-" + e.runID + "/" + name }

// say prints one timeline line for label.
func (e *env) say(label, format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.out, "  %+7.2fs  %-4s %s\n", time.Since(e.start).Seconds(), label, fmt.Sprintf(format, args...))
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// demoDir makes the run's temporary directory.
func demoDir() (string, error) {
	d, err := os.MkdirTemp("", "dlock-demo-")
	if err != nil {
		return "", fmt.Errorf("demo: temporary directory: %w", err)
	}
	return d, nil
}
