package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

var modes = []pglock.Config{{Mode: pglock.Lease}, {Mode: pglock.Advisory}}

// faultBudget is the deadline of every attempt in the fault tests, and
// faultSlack how late past it an attempt may return.
const (
	faultBudget = 1500 * time.Millisecond
	faultSlack  = 300 * time.Millisecond
)

// attempt makes one driver attempt (TryAcquire, or AcquireWait when the
// driver queues and wait is set) with a faultBudget deadline, and fails t
// unless it returned an error by the deadline: a fault must never read as
// a grant nor as a lock held by someone else.
func attempt(t *testing.T, drv driver.Driver, name string, wait bool, what string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), faultBudget)
	defer cancel()
	req := driver.Request{Name: name, Token: fmt.Sprintf("tok-%d", time.Now().UnixNano()), Owner: "fault", TTL: time.Minute}
	start := time.Now()
	var (
		g   driver.Grant
		err error
	)
	if q, ok := drv.(driver.Queuer); ok && wait {
		g, err = q.AcquireWait(ctx, req)
	} else {
		g, err = drv.TryAcquire(ctx, req)
	}
	if took := time.Since(start); took > faultBudget+faultSlack {
		t.Errorf("%s: returned %s after its %s deadline", what, took-faultBudget, faultBudget)
	}
	switch {
	case err == nil && g.Acquired:
		t.Errorf("%s: granted (fence %d), want an error", what, g.Fence)
		_ = drv.Release(context.Background(), name, req.Token)
	case err == nil:
		t.Errorf("%s: reported held by %+v, want an error", what, g.Holder)
	}
	return err
}

// TestFaultMissingSchema: without Migrate, every attempt in either mode is
// a permanent error naming the fix and the mode, never "held", and a
// Locker's TryAcquire says so without matching ErrNotAcquired.
func TestFaultMissingSchema(t *testing.T) {
	url := testserver.Postgres(t).NewDatabase(t)
	pool := newPool(t, url)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			l, err := cfg.Locker(pool)
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			for i := range 20 {
				err := attempt(t, l.Driver(), "unmigrated", i%2 == 0, "attempt without schema")
				if !errors.Is(err, driver.ErrPermanent) {
					t.Errorf("attempt without schema = %v, want driver.ErrPermanent", err)
				}
				var se *pglock.SchemaError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), "dlock migrate --url") ||
					!strings.Contains(err.Error(), "mode="+string(cfg.Mode)) {
					t.Fatalf("attempt without schema = %v, want a SchemaError naming 'dlock migrate --url' and mode=%s", err, cfg.Mode)
				}
			}
			for range 10 {
				_, err = l.TryAcquire(ctx(t), "unmigrated")
				if errors.Is(err, dlock.ErrNotAcquired) || !errors.Is(err, driver.ErrPermanent) {
					t.Fatalf("Locker.TryAcquire without schema = %v, want a permanent backend error, not ErrNotAcquired", err)
				}
			}
			t.Logf("without Migrate: %v", err)
		})
	}
}

// TestFaultMissingSchemaEveryPath: without Migrate, every call that
// reaches the schema names the fix (run dlock migrate), in both modes:
// List, Inspect, ForceRelease, TryAcquire, Acquire and, in lease mode,
// Release (an advisory release of a token with no session asks nothing of
// the server), and the run ledger's ClaimRun, FinishRun and Runs, each
// as a *SchemaError. `dlock run` lists the name before it acquires (to refuse
// a semaphore's or an election's name), so a List without the fix made
// the command's first error read "relation \"dlock_leases\" does not exist".
func TestFaultMissingSchemaEveryPath(t *testing.T) {
	url := testserver.Postgres(t).NewDatabase(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			l, err := dlock.Open(ctx(t), url+"&mode="+string(cfg.Mode))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			paths := []callPath{
				{"List", func(c context.Context) error { _, err := l.List(c, ""); return err }},
				{"Inspect", func(c context.Context) error { _, _, err := l.Inspect(c, "unmigrated"); return err }},
				{"ForceRelease", func(c context.Context) error { _, _, _, err := l.ForceRelease(c, "unmigrated"); return err }},
				{"TryAcquire", func(c context.Context) error { _, err := l.TryAcquire(c, "unmigrated"); return err }},
				{"Acquire", func(c context.Context) error {
					_, err := l.Acquire(c, "unmigrated", dlock.WithWait(5*time.Second))
					return err
				}},
				{"Release", func(c context.Context) error { return l.Driver().Release(c, "unmigrated", "tok") }},
			}
			paths = append(paths, ledgerPaths(l)...)
			for _, p := range paths {
				if p.name == "Release" && cfg.Mode == pglock.Advisory {
					continue
				}
				err := p.call(ctx(t))
				var se *pglock.SchemaError
				if !errors.As(err, &se) || !strings.Contains(err.Error(), "run 'dlock migrate --url postgres://") ||
					!strings.Contains(err.Error(), "mode="+string(cfg.Mode)) {
					t.Errorf("%s without schema = %v; want a SchemaError naming 'dlock migrate --url' and mode=%s", p.name, err, cfg.Mode)
				}
			}
		})
	}
}

// TestFaultMissingSchemaURL: opened from a URL, the fix names the URL,
// without its password.
func TestFaultMissingSchemaURL(t *testing.T) {
	srv := testserver.Postgres(t)
	url := srv.NewDatabase(t)
	db := url[strings.LastIndex(url, "/")+1 : strings.Index(url, "?")]
	exec(t, url, "GRANT ALL ON DATABASE "+db+" TO dlock_auth")
	l, err := dlock.Open(ctx(t), srv.AuthURL(db, srv.Password)+"&mode=advisory")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = l.TryAcquire(ctx(t), "x")
	if err == nil || !strings.Contains(err.Error(), "dlock migrate --url postgres://dlock_auth@") ||
		strings.Contains(err.Error(), srv.Password) || !strings.Contains(err.Error(), "mode=advisory") {
		t.Errorf("TryAcquire without schema = %v; want the fix with the URL, without the password", err)
	}
}

// callPath is one call of a Locker or driver, named for a failure.
type callPath struct {
	name string
	call func(context.Context) error
}

func exec(t *testing.T, url, sql string) {
	t.Helper()
	if _, err := newPool(t, url).Exec(ctx(t), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// TestFaultPermissions: a role that may connect but not use dlock's
// objects, and a wrong password, are permanent errors, never "held".
func TestFaultPermissions(t *testing.T) {
	srv := testserver.Postgres(t)
	d := newDB(t)
	db := d.url[strings.LastIndex(d.url, "/")+1 : strings.Index(d.url, "?")]
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			for _, tc := range []struct{ what, password string }{
				{"no privileges on dlock's objects", srv.Password},
				{"wrong password", "wrong-" + srv.Password},
			} {
				pool, err := pgxpool.New(ctx(t), srv.AuthURL(db, tc.password))
				if err != nil {
					t.Fatal(err)
				}
				l, err := cfg.Locker(pool)
				if err != nil {
					t.Fatal(err)
				}
				for i := range 4 {
					err := attempt(t, l.Driver(), "perm", i%2 == 0, tc.what)
					if !errors.Is(err, driver.ErrPermanent) {
						t.Errorf("%s: %v, want driver.ErrPermanent", tc.what, err)
					}
					if strings.Contains(fmt.Sprint(err), srv.Password) {
						t.Errorf("%s: the error shows the password: %v", tc.what, err)
					}
				}
				_, err = l.TryAcquire(ctx(t), "perm")
				if errors.Is(err, dlock.ErrNotAcquired) || err == nil {
					t.Errorf("%s: Locker.TryAcquire = %v, want a backend error", tc.what, err)
				}
				t.Logf("%s: %v", tc.what, err)
				_ = l.Close()
				pool.Close()
			}
		})
	}
}

// TestFaultTerminatedBackend terminates the backends of the driver's pool
// before each step of the acquire path (a connection's first statement,
// a later one, and, in advisory mode, a wait blocked in the server): the
// attempt is an error, never "held", and the next one succeeds.
func TestFaultTerminatedBackend(t *testing.T) {
	d := newDB(t)
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			pool := newPool(t, d.url+"&pool_max_conns=2&application_name=faulty")
			drv, err := cfg.Driver(pool)
			if err != nil {
				t.Fatal(err)
			}
			defer drv.Close()
			for step, what := range []string{"first statement on a connection", "later statement on a connection"} {
				if step == 1 {
					grantRelease(t, drv, "warm")
				}
				warm(t, pool, 1)
				terminate(t, d, "faulty")
				attempt(t, drv, "terminated", false, what)
				pool.Reset() // the other terminated connection would fail its next statement too
				grantRelease(t, drv, "after-"+what)
			}
			if cfg.Mode != pglock.Advisory {
				return
			}
			holder, err := cfg.Driver(d.pool)
			if err != nil {
				t.Fatal(err)
			}
			defer holder.Close()
			g, err := holder.TryAcquire(ctx(t), driver.Request{Name: "blocked", Token: "h", Owner: "h", TTL: time.Minute})
			if err != nil || !g.Acquired {
				t.Fatalf("holder: %+v %v", g, err)
			}
			res := make(chan error, 1)
			go func() { res <- attempt(t, drv, "blocked", true, "wait blocked in the server") }()
			time.Sleep(300 * time.Millisecond)
			terminate(t, d, "faulty")
			err = <-res
			t.Logf("wait blocked in the server, backend terminated: %v", err)
			if errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("wait blocked in the server: %v, want the termination, not the deadline", err)
			}
			_ = holder.Release(ctx(t), "blocked", "h")
		})
	}
}

// terminate ends every backend whose application_name is app, waiting
// until they have exited.
func terminate(t *testing.T, d *db, app string) {
	t.Helper()
	d.exec(t, `SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE application_name = $1 OR starts_with(application_name, $1 || ' (dlock wait until ')`, app)
}

// TestFaultPausedServer freezes the server (SIGSTOP) under attempts with
// a short deadline, at each step: an idle pooled connection, a new
// connection, and (advisory) a wait blocked in the server. Every attempt
// returns by its deadline with an error, never "held".
func TestFaultPausedServer(t *testing.T) {
	srv := testserver.NewPostgres(t)
	admin := newPool(t, srv.URL())
	for _, cfg := range modes {
		migrate(t, admin, cfg)
	}
	for _, cfg := range modes {
		t.Run(string(cfg.Mode), func(t *testing.T) {
			pool := newPool(t, srv.URL()+"&pool_max_conns=4")
			drv, err := cfg.Driver(pool)
			if err != nil {
				t.Fatal(err)
			}
			defer drv.Close()
			grantRelease(t, drv, "warm")
			for _, wait := range []bool{false, true} {
				srv.Pause()
				attempt(t, drv, "paused", wait, fmt.Sprintf("attempt on a paused server (wait %v)", wait))
				srv.Resume()
			}
			pool.Reset() // no idle connection: the next attempt dials
			srv.Pause()
			attempt(t, drv, "paused", false, "attempt dialing a paused server")
			srv.Resume()
			grantRelease(t, drv, "after-pause")
		})
	}
}

// grantRelease takes name with a fresh token and releases it, failing t
// unless both work.
func grantRelease(t *testing.T, drv driver.Driver, name string) {
	t.Helper()
	tok := fmt.Sprintf("tok-%d", time.Now().UnixNano())
	g, err := drv.TryAcquire(ctx(t), driver.Request{Name: name, Token: tok, Owner: "o", TTL: time.Minute})
	if err != nil || !g.Acquired {
		t.Fatalf("TryAcquire(%s) = %+v, %v", name, g, err)
	}
	if err := drv.Release(ctx(t), name, tok); err != nil {
		t.Fatalf("Release(%s): %v", name, err)
	}
}
