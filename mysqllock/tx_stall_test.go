package mysqllock_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// TestAbandonedGrantGrantsNothing: a grant whose message reaches a
// server stopped with SIGSTOP returns by its caller's deadline; when the
// server resumes, it runs the message all the same (it was in the
// socket), and the deadline the message carries makes it grant nothing:
// the free row stays free, and the next attempt gets it.
func TestAbandonedGrantGrantsNothing(t *testing.T) {
	srv := testserver.NewMariaDB(t)
	name := srv.NewDatabase(t)
	other, admin := onURL(t, srv, name, "tcp")
	stop := &stopOnStatement{srv: srv, stmt: "innodb_lock_wait_timeout"}
	attempts, _ := onURL(t, srv, name, stop.register(t))
	first := driver.Request{Name: "stalled", Token: strings.Repeat("a", 32), Owner: "first", TTL: time.Hour}
	if g, err := attempts.TryAcquire(ctx(t), first); err != nil || !g.Acquired {
		t.Fatalf("first TryAcquire: %+v, %v", g, err)
	}
	if err := attempts.Release(ctx(t), first.Name, first.Token); err != nil {
		t.Fatal(err)
	}
	stop.arm(t, admin)
	const deadline = time.Second
	attempt, cancel := context.WithTimeout(ctx(t), deadline)
	defer cancel()
	second := driver.Request{Name: "stalled", Token: strings.Repeat("b", 32), Owner: "gave up", TTL: time.Hour}
	type result struct {
		g    driver.Grant
		err  error
		took time.Duration
	}
	done := make(chan result, 1)
	go func() {
		start := time.Now()
		g, err := attempts.TryAcquire(attempt, second)
		done <- result{g, err, time.Since(start)}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second): // thirty times the attempt's deadline
		_ = srv.Resume()
		res = <-done
		t.Fatalf("TryAcquire with a %s deadline still blocked 30s later on a stopped server (returned %+v, %v after SIGCONT)", deadline, res.g, res.err)
	}
	g, err, took := res.g, res.err, res.took
	if !stop.fired.Load() {
		t.Fatal("the attempt never sent its grant: the test stopped nothing")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, context.DeadlineExceeded) || g.Acquired {
		t.Fatalf("attempt on a stopped server: %+v, %v; want its deadline", g, err)
	}
	// Three seconds of slack for a loaded machine: the attempt must not
	// wait out a bound of its own past the caller's.
	if took > deadline+3*time.Second {
		t.Fatalf("TryAcquire with a %s deadline returned after %s on a stopped server", deadline, took.Round(time.Millisecond))
	}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		var token sql.NullString
		if err := admin.QueryRowContext(ctx(t), `SELECT token FROM dlock_leases WHERE name = 'stalled'`).Scan(&token); err != nil {
			t.Fatal(err)
		}
		if token.Valid {
			t.Fatalf("the resumed server granted the abandoned attempt (token %s)", token.String)
		}
	}
	third := driver.Request{Name: "stalled", Token: strings.Repeat("c", 32), Owner: "next", TTL: time.Hour}
	if g, err := other.TryAcquire(ctx(t), third); err != nil || !g.Acquired {
		t.Fatalf("attempt after the server resumed: %+v, %v", g, err)
	}
	assertNoOpenTransaction(t, admin)
}

// assertNoOpenTransaction checks that no session of the server stays
// inside a transaction (one lent back to a pool mid-transaction would),
// giving the resumed server 30s to notice the connections closed.
func assertNoOpenTransaction(t *testing.T, admin *sql.DB) {
	t.Helper()
	var n int
	for range 300 {
		if err := admin.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM information_schema.innodb_trx`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("%d transactions still open 30s after every attempt returned", n)
}

// onURL opens a lease-mode driver on database name of srv, dialled over
// the go-sql-driver network net, with the schema migrated; and its pool.
func onURL(t *testing.T, srv *testserver.MariaDBServer, name, net string) (driver.Driver, *sql.DB) {
	t.Helper()
	cfg, err := mysql.ParseDSN(srv.DSN(name))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net = net
	pool := openSQL(t, cfg.FormatDSN())
	migrate(t, pool, mysqllock.Config{})
	drv, err := mysqllock.Config{}.Driver(pool)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = drv.Close() })
	return drv, pool
}

// stopOnStatement stops srv (SIGSTOP) just before a connection it dialled
// sends a statement containing stmt (as a query or to prepare), once,
// after arm.
type stopOnStatement struct {
	srv   *testserver.MariaDBServer
	stmt  string
	pid   string
	armed atomic.Bool
	fired atomic.Bool
	once  sync.Once
}

var stopNets atomic.Int64

// register makes a go-sql-driver network name that dials through s.
func (s *stopOnStatement) register(t *testing.T) string {
	name := "stop" + strings.Repeat("x", int(stopNets.Add(1)))
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &stopConn{Conn: c, s: s}, nil
	})
	t.Cleanup(func() { _ = s.srv.Resume() })
	return name
}

// arm makes the next statement containing s.stmt stop the server; admin
// is a pool on the server, which names its process.
func (s *stopOnStatement) arm(t *testing.T, admin *sql.DB) {
	t.Helper()
	var pidFile string
	if err := admin.QueryRowContext(ctx(t), `SELECT @@pid_file`).Scan(&pidFile); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	s.pid = strings.TrimSpace(string(b))
	s.armed.Store(true)
}

// waitStopped waits until every thread of the server is stopped: SIGSTOP
// returns before they are, and a thread still running would answer the
// statement about to go out.
func (s *stopOnStatement) waitStopped() {
	for range 10000 {
		if allStopped(s.pid) {
			return
		}
		time.Sleep(time.Millisecond)
	}
	panic("mariadbd " + s.pid + " still running 10s after SIGSTOP")
}

// allStopped reports whether every thread of process pid is stopped.
func allStopped(pid string) bool {
	stats, err := filepath.Glob("/proc/" + pid + "/task/*/stat")
	if err != nil || len(stats) == 0 {
		return false
	}
	for _, f := range stats {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		_, after, _ := strings.Cut(string(b), ") ") // the name may hold spaces
		if !strings.HasPrefix(after, "T") {
			return false
		}
	}
	return true
}

type stopConn struct {
	net.Conn
	s *stopOnStatement
}

// Write stops the server before a packet carrying the statement goes
// out.
func (c *stopConn) Write(p []byte) (int, error) {
	if c.s.armed.Load() && isStatement(p, c.s.stmt) {
		c.s.once.Do(func() {
			if err := c.s.srv.Pause(); err != nil {
				panic(errors.Join(errors.New("SIGSTOP mariadbd"), err))
			}
			c.s.waitStopped()
			c.s.fired.Store(true)
		})
	}
	return c.Conn.Write(p)
}

// isStatement reports whether p is a client packet that sends a query or
// a statement to prepare (COM_QUERY, COM_STMT_PREPARE) containing stmt.
func isStatement(p []byte, stmt string) bool {
	return len(p) > 5 && (p[4] == 0x03 || p[4] == 0x16) && bytes.Contains(p[5:], []byte(stmt))
}
