package baseline

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"net"
	"sync/atomic"
	"syscall"

	"github.com/go-sql-driver/mysql"
)

// mysqlPool opens a *sql.DB on a copy of mc whose round trips rt counts.
//
// go-sql-driver/mysql has no hook on its commands, so the count is taken
// on the wire: a round trip is a read from the server that follows a
// write to it. That counts what a statement really costs: a statement
// with parameters on a client that does not interpolate them is three
// messages (prepare, execute, and a close that waits for no reply), two
// round trips. A connection's handshake and set-up (charset, session
// variables) are not counted: they depend on when the pool dials, not on
// the lock.
func mysqlPool(mc *mysql.Config, rt *Counter) (*sql.DB, error) {
	c := mc.Clone()
	c.DialFunc = dialCounted(rt)
	connector, err := mysql.NewConnector(c)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(countingConnector{connector}), nil
}

// countedSlot carries, in the context of one Connect, the connection it
// dialed, so that counting starts once its set-up is done.
type countedSlot struct{ conn *countedConn }

type countedSlotKey struct{}

// countingConnector turns a new connection's count on after Connect.
type countingConnector struct{ driver.Connector }

func (c countingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	slot := &countedSlot{}
	conn, err := c.Connector.Connect(context.WithValue(ctx, countedSlotKey{}, slot))
	if err == nil && slot.conn != nil {
		slot.conn.on.Store(true)
	}
	return conn, err
}

// dialCounted dials TCP as go-sql-driver/mysql does and wraps the
// connection in a countedConn.
func dialCounted(rt *Counter) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var d net.Dialer
		nc, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc := &countedConn{Conn: nc, rt: rt}
		if slot, ok := ctx.Value(countedSlotKey{}).(*countedSlot); ok {
			slot.conn = cc
		}
		return cc, nil
	}
}

// countedConn counts a round trip at each read that follows a write, once
// on. One goroutine at a time reads and writes a MySQL connection.
type countedConn struct {
	net.Conn
	rt    *Counter
	on    atomic.Bool
	wrote bool
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.wrote = true
	return c.Conn.Write(p)
}

func (c *countedConn) Read(p []byte) (int, error) {
	if c.wrote && c.on.Load() {
		c.rt.Add(1)
	}
	c.wrote = false
	return c.Conn.Read(p)
}

// SyscallConn gives go-sql-driver/mysql's liveness check of a pooled
// connection the socket, as it has without the wrapper.
func (c *countedConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, syscall.EINVAL
	}
	return sc.SyscallConn()
}
