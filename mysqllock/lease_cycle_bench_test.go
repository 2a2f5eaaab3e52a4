package mysqllock_test

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/mysqllock"
	"github.com/go-sql-driver/mysql"
)

// BenchmarkLeaseCycle measures one uncontended TryAcquire and Release in
// lease mode, with the round trips a cycle costs: on a pool that batches
// statements (as dlock.Open makes it), on one that only interpolates
// parameters, and on one that prepares them (go-sql-driver/mysql's
// defaults, a user's pool given to New).
func BenchmarkLeaseCycle(b *testing.B) {
	d := newDB(b)
	for _, p := range []struct{ interpolate, multi bool }{{true, true}, {true, false}, {false, false}} {
		b.Run(fmt.Sprintf("interpolateParams=%t,multiStatements=%t", p.interpolate, p.multi), func(b *testing.B) {
			var rt atomic.Int64
			cfg, err := mysql.ParseDSN(d.srv.DSN(d.name))
			if err != nil {
				b.Fatal(err)
			}
			cfg.InterpolateParams, cfg.MultiStatements = p.interpolate, p.multi
			cfg.Net = countingNet(&rt)
			pool := openSQL(b, cfg.FormatDSN())
			l, err := mysqllock.New(pool, dlock.WithTTL(time.Minute))
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			ctx := ctx(b)
			cycle := func() {
				lease, err := l.TryAcquire(ctx, "bench/cycle")
				if err != nil {
					b.Fatal(err)
				}
				if err := lease.Release(ctx); err != nil {
					b.Fatal(err)
				}
			}
			cycle() // the pool's connections and the row
			rt.Store(0)
			b.ResetTimer()
			for range b.N {
				cycle()
			}
			b.ReportMetric(float64(rt.Load())/float64(b.N), "roundtrips/op")
		})
	}
}

var countingNets atomic.Int64

// countingNet registers a go-sql-driver network that counts in rt a round
// trip at each read from the server that follows a write to it.
func countingNet(rt *atomic.Int64) string {
	name := fmt.Sprintf("counted%d", countingNets.Add(1))
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return &countedConn{Conn: c, rt: rt}, nil
	})
	return name
}

type countedConn struct {
	net.Conn
	rt    *atomic.Int64
	wrote bool
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.wrote = true
	return c.Conn.Write(p)
}

func (c *countedConn) Read(p []byte) (int, error) {
	if c.wrote {
		c.rt.Add(1)
	}
	c.wrote = false
	return c.Conn.Read(p)
}
