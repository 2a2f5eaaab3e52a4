package mysqllock_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"net"
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
	stop.arm()
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

// assertNoOpenTransaction checks that no session of the server is inside
// a transaction: one lent back to a pool mid-transaction would be.
func assertNoOpenTransaction(t *testing.T, admin *sql.DB) {
	t.Helper()
	var n int
	if err := admin.QueryRowContext(ctx(t), `SELECT COUNT(*) FROM information_schema.innodb_trx`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d transactions open after every attempt returned", n)
	}
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
// sends stmt as a query, once, after arm.
type stopOnStatement struct {
	srv   *testserver.MariaDBServer
	stmt  string
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

func (s *stopOnStatement) arm() { s.armed.Store(true) }

type stopConn struct {
	net.Conn
	s *stopOnStatement
}

// Write stops the server before a COM_QUERY packet carrying the
// statement goes out.
func (c *stopConn) Write(p []byte) (int, error) {
	if c.s.armed.Load() && len(p) > 5 && p[4] == 0x03 && bytes.EqualFold(bytes.TrimSpace(p[5:]), []byte(c.s.stmt)) {
		c.s.once.Do(func() {
			if err := c.s.srv.Pause(); err != nil {
				panic(errors.Join(errors.New("SIGSTOP mariadbd"), err))
			}
			c.s.fired.Store(true)
		})
	}
	return c.Conn.Write(p)
}
