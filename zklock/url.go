package zklock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Defaults of the URL's query keys.
const (
	// DefaultSessionTimeout is the session timeout asked for unless the
	// URL's session_timeout says otherwise.
	DefaultSessionTimeout = 10 * time.Second
	// DefaultDialTimeout bounds Open's wait for a session unless the URL's
	// dial_timeout says otherwise.
	DefaultDialTimeout = 5 * time.Second
)

// urlConfig is what a zk:// URL says.
type urlConfig struct {
	servers        []string
	username       string
	password       string
	root           string
	sessionTimeout time.Duration
	dialTimeout    time.Duration
}

// parseURL reads zk://[user:password@]host:port[,host:port...][/root]
// [?session_timeout=D&dial_timeout=D]. Its errors never contain the
// password.
func parseURL(raw string) (urlConfig, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != Scheme {
		return urlConfig{}, invalidURL("want zk://host:port[,host:port...][/root]")
	}
	c := urlConfig{root: DefaultRoot, sessionTimeout: DefaultSessionTimeout, dialTimeout: DefaultDialTimeout}
	if u.User != nil {
		c.username = u.User.Username()
		c.password, _ = u.User.Password()
		if c.username == "" {
			return urlConfig{}, invalidURL("empty user name (digest credentials are user:password)")
		}
	}
	if u.Path != "" && u.Path != "/" {
		if c.root, err = cleanRoot(u.Path); err != nil {
			return urlConfig{}, err
		}
	}
	if c.servers, err = parseServers(u.Host); err != nil {
		return urlConfig{}, err
	}
	// Strictly: Go's URL.Query drops a pair with a ';' without a word.
	q, err := driver.ParseQuery(u.RawQuery)
	if err == nil {
		err = driver.Unique(q)
	}
	if err != nil {
		return urlConfig{}, invalidURL("%v", err)
	}
	return c, c.query(q)
}

// parseServers splits a comma-separated host:port list (the port
// defaults to ZooKeeper's 2181).
func parseServers(hosts string) ([]string, error) {
	if hosts == "" {
		return nil, invalidURL("no server (want zk://host:port[,host:port...])")
	}
	servers := strings.Split(hosts, ",")
	for i, s := range servers {
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			host, port = s, "2181"
		}
		if host == "" || strings.ContainsAny(host, ":[]") {
			return nil, invalidURL("server %q: want host:port", s)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, invalidURL("server %q: port %q is not 1-65535", s, port)
		}
		servers[i] = net.JoinHostPort(host, port)
	}
	return servers, nil
}

// query applies the URL's own keys and rejects any other.
func (c *urlConfig) query(q url.Values) error {
	for key, vals := range q {
		v := vals[0]
		switch key {
		case "session_timeout":
			d, err := driver.ParseDuration(v)
			if err != nil {
				return invalidURL("%s: %v", driver.ShowSetting(key, v), err)
			}
			if d <= 0 {
				return invalidURL("session_timeout=%q: want a positive duration like 10s", v)
			}
			c.sessionTimeout = d
		case "dial_timeout":
			d, err := driver.ParseDuration(v)
			if err != nil {
				return invalidURL("%s: %v", driver.ShowSetting(key, v), err)
			}
			if d <= 0 {
				return invalidURL("dial_timeout=%q: want a positive duration like 5s", v)
			}
			c.dialTimeout = d
		default:
			return invalidURL("unknown query key %q (zk URLs know session_timeout and dial_timeout, and dlock's ttl, wait, owner)", key)
		}
	}
	return nil
}

func invalidURL(format string, args ...any) error {
	return fmt.Errorf("%w: zk URL: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}

// open is the driver.Opener registered for zk://. It waits, bounded by
// ctx and dial_timeout, for a session, authenticates, and checks that the
// root can be created and read; the connection it opens is closed with
// the Locker.
func open(ctx context.Context, raw string) (driver.Driver, error) {
	c, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	logger := driver.LoggerFrom(ctx)
	conn, _, err := zk.Connect(c.servers, c.sessionTimeout, zk.WithLogger(zkLogger{logger}), zk.WithLogInfo(false))
	if err != nil {
		return nil, fmt.Errorf("zookeeper %s: %w", strings.Join(c.servers, ","), err)
	}
	d, err := c.prepare(ctx, conn)
	if err != nil {
		conn.Close()
		return nil, err
	}
	d.logger = logger
	d.dialTimeout = c.dialTimeout
	return d, nil
}

// prepare waits for the session and readies the root on conn.
func (c urlConfig) prepare(ctx context.Context, conn *zk.Conn) (*zkDriver, error) {
	ctx, cancel := context.WithTimeout(ctx, c.dialTimeout)
	defer cancel()
	if err := waitSession(ctx, conn); err != nil {
		return nil, fmt.Errorf("zookeeper %s: no session within %s: %w", strings.Join(c.servers, ","), c.dialTimeout, err)
	}
	acl := zk.WorldACL(zk.PermAll)
	if c.username != "" {
		auth := []byte(c.username + ":" + c.password)
		if _, err := bounded(ctx, func() (struct{}, error) { return struct{}{}, conn.AddAuth("digest", auth) }); err != nil {
			return nil, driver.Permanent(fmt.Errorf("zookeeper: digest authentication as %q: %w", c.username, err))
		}
		acl = zk.AuthACL(zk.PermAll) // the nodes this user creates are its own
	}
	d, err := newDriver(conn, Config{Root: c.root, SessionTimeout: c.sessionTimeout, ACL: acl}, true)
	if err != nil {
		return nil, err
	}
	if err := d.checkRoot(ctx, c.username != ""); err != nil {
		return nil, err
	}
	return d, nil
}

// waitSession waits until conn has a session.
func waitSession(ctx context.Context, conn *zk.Conn) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for conn.State() != zk.StateHasSession {
		select {
		case <-ctx.Done():
			return fmt.Errorf("still %s: %w", conn.State(), ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// checkRoot creates the root when missing and lists it, so that a root
// the session may not use fails at Open with a clear error.
func (d *zkDriver) checkRoot(ctx context.Context, creds bool) error {
	err := d.makeRoot(ctx)
	if err == nil {
		_, err = d.children(ctx, d.root)
	}
	if errors.Is(err, zk.ErrNoAuth) && !creds {
		return driver.Permanent(fmt.Errorf("zookeeper: root %s is protected by an ACL and the URL has no credentials (zk://user:password@host/...): %w", d.root, zk.ErrNoAuth))
	}
	if errors.Is(err, zk.ErrNoAuth) {
		return driver.Permanent(fmt.Errorf("zookeeper: root %s: its ACL refuses these credentials: %w", d.root, zk.ErrNoAuth))
	}
	return err
}

// zkLogger sends go-zookeeper's messages (connects, reconnects) to slog
// at debug level: the driver reports what matters through its errors.
type zkLogger struct{ l *slog.Logger }

func (z zkLogger) Printf(format string, args ...any) {
	z.l.Debug("zookeeper: " + fmt.Sprintf(format, args...))
}

// Settings implements driver.SettingsReporter: the root (a URL's path),
// session_timeout, and dial_timeout when opened from a URL.
func (d *zkDriver) Settings() map[string]string {
	s := map[string]string{"root": d.root, "session_timeout": d.timeout.String()}
	if d.dialTimeout > 0 {
		s["dial_timeout"] = d.dialTimeout.String()
	}
	return s
}
