package etcdlock

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// DefaultDialTimeout bounds Open's first connection unless the URL's
// dial_timeout says otherwise.
const DefaultDialTimeout = 5 * time.Second

// urlConfig is what an etcd:// URL says.
type urlConfig struct {
	endpoints   []string
	username    string
	password    string
	prefix      string
	dialTimeout time.Duration
}

// parseURL reads etcd://[user[:password]@]host:port[,host:port...][/]
// [?prefix=P&dial_timeout=D]. Its errors never contain the password.
func parseURL(raw string) (urlConfig, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != Scheme {
		return urlConfig{}, invalidURL("want etcd://host:port[,host:port...]")
	}
	c := urlConfig{prefix: DefaultPrefix, dialTimeout: DefaultDialTimeout}
	if u.User != nil {
		c.username = u.User.Username()
		c.password, _ = u.User.Password()
	}
	if u.Path != "" && u.Path != "/" {
		return urlConfig{}, invalidURL("unexpected path %q (the key prefix goes in ?prefix=)", u.Path)
	}
	if c.endpoints, err = parseEndpoints(u.Host); err != nil {
		return urlConfig{}, err
	}
	return c, c.query(u.Query())
}

// parseEndpoints splits a comma-separated host:port list.
func parseEndpoints(hosts string) ([]string, error) {
	if hosts == "" {
		return nil, invalidURL("no endpoint (want etcd://host:port[,host:port...])")
	}
	eps := strings.Split(hosts, ",")
	for _, ep := range eps {
		_, port, err := net.SplitHostPort(ep)
		if err != nil {
			return nil, invalidURL("endpoint %q: want host:port", ep)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, invalidURL("endpoint %q: port %q is not 1-65535", ep, port)
		}
	}
	return eps, nil
}

// query applies the URL's own keys and rejects any other.
func (c *urlConfig) query(q url.Values) error {
	for key, vals := range q {
		v := vals[len(vals)-1]
		switch key {
		case "prefix":
			if v == "" {
				return invalidURL("prefix is empty (the default is %q)", DefaultPrefix)
			}
			c.prefix = v
		case "dial_timeout":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return invalidURL("dial_timeout=%q: want a positive duration like 5s", v)
			}
			c.dialTimeout = d
		default:
			return invalidURL("unknown query key %q (etcd URLs know prefix and dial_timeout, and dlock's ttl, wait, owner)", key)
		}
	}
	return nil
}

func invalidURL(format string, args ...any) error {
	return fmt.Errorf("%w: etcd URL: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}

// open is the driver.Opener registered for etcd://. The client it builds
// is closed with the Locker.
func open(_ context.Context, raw string) (driver.Driver, error) {
	c, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.endpoints,
		Username:    c.username,
		Password:    c.password,
		DialTimeout: c.dialTimeout,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %s: %w", strings.Join(c.endpoints, ","), err)
	}
	return newDriver(cli, c.prefix, true)
}
