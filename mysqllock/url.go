package mysqllock

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/go-sql-driver/mysql"
)

func init() {
	dlock.Register(Scheme, open)
	dlock.Register(SchemeAlt, open)
}

// Query keys this package reads from a URL; the others go to
// go-sql-driver/mysql as DSN parameters.
const (
	keyMode  = "mode"
	keyTable = "table"
)

// defaultPort is MySQL's and MariaDB's TCP port.
const defaultPort = "3306"

// open builds a driver from a mysql:// or mariadb:// URL:
// mysql://user:password@host:port/database?mode=lease|get_lock&table=…,
// over TCP. Query keys other than mode and table are go-sql-driver/mysql
// DSN parameters (tls, timeout, charset, …); one the driver does not know
// is sent to the server as a session variable, which refuses a name it
// does not know, naming it. The pool is checked with a ping, so a wrong
// address or password fails here, and it is closed with the driver.
func open(ctx context.Context, rawURL string) (driver.Driver, error) {
	cfg, mc, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql URL: %v", dlock.ErrInvalidArgument, err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxIdleConns(16)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, (&base{mode: cfg.Mode}).classifyAdmin(err)
	}
	drv, err := cfg.newDriver(db, true, dlock.Redact(rawURL))
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return drv, nil
}

// parseURL reads rawURL into a Config and a go-sql-driver/mysql config.
func parseURL(rawURL string) (Config, *mysql.Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Config{}, nil, fmt.Errorf("%w: malformed URL", dlock.ErrInvalidArgument)
	}
	if u.Scheme != Scheme && u.Scheme != SchemeAlt {
		return Config{}, nil, fmt.Errorf("%w: scheme %q is not %s or %s", dlock.ErrInvalidArgument, u.Scheme, Scheme, SchemeAlt)
	}
	q, err := driver.ParseQuery(u.RawQuery)
	if err == nil {
		err = driver.Unique(q)
	}
	if err != nil {
		return Config{}, nil, fmt.Errorf("%w: mysql URL: %v", dlock.ErrInvalidArgument, err)
	}
	cfg := Config{Mode: Mode(q.Get(keyMode)), Table: q.Get(keyTable)}
	if q.Has(keyMode) && cfg.Mode == "" {
		return Config{}, nil, fmt.Errorf("%w: URL query mode is empty (want %s or %s)", dlock.ErrInvalidArgument, Lease, GetLock)
	}
	if q.Has(keyTable) && cfg.Table == "" {
		return Config{}, nil, fmt.Errorf("%w: URL query table is empty", dlock.ErrInvalidArgument)
	}
	if _, err := cfg.mode(); err != nil {
		return Config{}, nil, err
	}
	if _, err := cfg.table(); err != nil {
		return Config{}, nil, err
	}
	q.Del(keyMode)
	q.Del(keyTable)
	mc, err := dsnConfig(u, q)
	if err != nil {
		return Config{}, nil, err
	}
	return cfg, mc, nil
}

// dsnConfig builds the go-sql-driver/mysql config of u, with q its
// remaining query keys. The password goes into the config, never into a
// string that an error could show.
func dsnConfig(u *url.URL, q url.Values) (*mysql.Config, error) {
	for k := range q {
		if strings.HasPrefix(strings.ToLower(k), "dlock") {
			return nil, fmt.Errorf("%w: unknown URL query key %q (mysqllock knows mode and table)", dlock.ErrInvalidArgument, k)
		}
	}
	if u.Opaque != "" || u.Host == "" {
		return nil, fmt.Errorf("%w: mysql URL: want mysql://user:password@host:port/database", dlock.ErrInvalidArgument)
	}
	db := strings.TrimPrefix(u.Path, "/")
	if strings.Contains(db, "/") {
		return nil, fmt.Errorf("%w: mysql URL: database %q has a '/'", dlock.ErrInvalidArgument, db)
	}
	if db == "" {
		return nil, fmt.Errorf("%w: mysql URL names no database (mysql://user@host/DATABASE): the lease table lives in one", dlock.ErrInvalidArgument)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = defaultPort
	}
	mc, err := mysql.ParseDSN("tcp(" + net.JoinHostPort(host, port) + ")/" + url.PathEscape(db) + "?" + q.Encode())
	if err != nil {
		return nil, fmt.Errorf("%w: mysql URL: %v", dlock.ErrInvalidArgument, err)
	}
	if u.User != nil {
		mc.User = u.User.Username()
		mc.Passwd, _ = u.User.Password()
	}
	// Statements with parameters are one round trip each, not a prepare,
	// an execute and a close: a grant is several statements, and the
	// driver's default doubled its round trips (9 a cycle instead of 5 in
	// get_lock mode). A URL that sets interpolateParams keeps its choice.
	if !q.Has("interpolateParams") {
		mc.InterpolateParams = true
	}
	// And with them, several statements in one message: a grant is two
	// round trips, not five (batch.go). Every statement mysqllock sends is
	// a fixed template with parameters, which the driver escapes.
	if !q.Has("multiStatements") {
		mc.MultiStatements = true
	}
	return mc, nil
}
