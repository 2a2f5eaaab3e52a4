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

// TestRefusedAttemptEndsByItsDeadline: an attempt refused by the locked
// read (another lease holds the row) whose ROLLBACK then meets a server
// stopped with SIGSTOP returns by its caller's deadline, not when the
// server resumes; and the connection it used does not go back to the
// pool inside its transaction.
func TestRefusedAttemptEndsByItsDeadline(t *testing.T) {
	srv := testserver.NewMariaDB(t)
	name := srv.NewDatabase(t)
	holder, admin := onURL(t, srv, name, "tcp")
	stop := &stopOnStatement{srv: srv, stmt: "ROLLBACK"}
	attempts, _ := onURL(t, srv, name, stop.register(t))

	first := driver.Request{Name: "stalled", Token: strings.Repeat("a", 32), Owner: "holder", TTL: time.Hour}
	if g, err := holder.TryAcquire(ctx(t), first); err != nil || !g.Acquired {
		t.Fatalf("first TryAcquire: %+v, %v", g, err)
	}
	stop.arm(t, admin)
	attempt, cancel := context.WithTimeout(ctx(t), 2*time.Second)
	defer cancel()
	second := driver.Request{Name: "stalled", Token: strings.Repeat("b", 32), Owner: "refused", TTL: time.Hour}
	type result struct {
		g   driver.Grant
		err error
	}
	done := make(chan result, 1)
	go func() {
		g, err := attempts.TryAcquire(attempt, second)
		done <- result{g, err}
	}()
	var res result
	select {
	case res = <-done:
	case <-time.After(30 * time.Second): // fifteen times the attempt's deadline
		_ = srv.Resume()
		res = <-done
		t.Fatalf("TryAcquire with a 2s deadline still blocked 30s later on a stopped server (returned %+v, %v after SIGCONT)", res.g, res.err)
	}
	if !stop.fired.Load() {
		t.Fatal("the attempt never sent ROLLBACK: the test stopped nothing")
	}
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if res.err != nil || res.g.Acquired || res.g.Holder.Owner != "holder" {
		t.Fatalf("refused attempt: %+v, %v; want a refusal naming holder", res.g, res.err)
	}
	assertNoOpenTransaction(t, admin)
	second.Name = "after"
	if g, err := attempts.TryAcquire(ctx(t), second); err != nil || !g.Acquired {
		t.Fatalf("attempt after the server resumed: %+v, %v", g, err)
	}
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

// TestRefusedKeyedAttemptEndsByItsDeadline: an attempt that took the
// name's wake key and was refused (the row is held by a lease without the
// key) gives the key back under its caller's context: when the server
// stops just as it does, the attempt still returns by its deadline.
func TestRefusedKeyedAttemptEndsByItsDeadline(t *testing.T) {
	srv := testserver.NewMariaDB(t)
	name := srv.NewDatabase(t)
	_, admin := onURL(t, srv, name, "tcp")
	stop := &stopOnStatement{srv: srv, stmt: "RELEASE_LOCK"}
	attempts, _ := onURL(t, srv, name, stop.register(t))
	if _, err := admin.ExecContext(ctx(t), `INSERT INTO dlock_leases (name, token, owner, fence, expires_at)
		VALUES ('keyless', REPEAT('a', 32), 'keyless holder', 1, UTC_TIMESTAMP(6) + INTERVAL 1 HOUR)`); err != nil {
		t.Fatal(err)
	}
	stop.arm(t, admin)
	const deadline = time.Second
	attempt, cancel := context.WithTimeout(ctx(t), deadline)
	defer cancel()
	req := driver.Request{Name: "keyless", Token: strings.Repeat("b", 32), Owner: "refused", TTL: time.Hour}
	start := time.Now()
	g, err := attempts.TryAcquire(attempt, req)
	took := time.Since(start)
	if err := srv.Resume(); err != nil {
		t.Fatal(err)
	}
	if !stop.fired.Load() {
		t.Fatal("the attempt never freed its wake key: the test stopped nothing")
	}
	if err != nil || g.Acquired || g.Holder.Owner != "keyless holder" {
		t.Fatalf("refused attempt: %+v, %v; want a refusal naming keyless holder", g, err)
	}
	// Three seconds of slack for a loaded machine: the attempt must not
	// wait out a bound of its own past the caller's.
	if took > deadline+3*time.Second {
		t.Fatalf("TryAcquire with a %s deadline returned after %s on a stopped server", deadline, took.Round(time.Millisecond))
	}
}
