package etcdlock

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Scheme is the URL scheme this package registers: etcd://host:port[,...].
const Scheme = "etcd"

func init() { dlock.Register(Scheme, open) }

// DefaultDialTimeout bounds Open's check that an endpoint answers unless
// the URL's dial_timeout says otherwise.
const DefaultDialTimeout = 2 * time.Second

// urlConfig is what an etcd:// URL says: how to reach the cluster, and
// the driver's Config.
type urlConfig struct {
	endpoints   []string
	username    string
	password    string
	dialTimeout time.Duration
	cfg         Config
}

// parseURL reads etcd://[user[:password]@]host:port[,host:port...][/]
// [?prefix=P&dial_timeout=D&election_timeout=E]. Its errors never contain
// the password.
func parseURL(raw string) (urlConfig, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != Scheme {
		return urlConfig{}, invalidURL("want etcd://host:port[,host:port...]")
	}
	c := urlConfig{dialTimeout: DefaultDialTimeout}
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
		v := vals[0]
		switch key {
		case "prefix":
			if v == "" {
				return invalidURL("prefix is empty (the default is %q)", DefaultPrefix)
			}
			c.cfg.Prefix = v
		case "dial_timeout":
			d, err := driver.ParseDuration(v)
			if err != nil {
				return invalidURL("%s: %v", driver.ShowSetting(key, v), err)
			}
			if d <= 0 {
				return invalidURL("dial_timeout=%q: want a positive duration like 5s", v)
			}
			c.dialTimeout = d
		case "election_timeout":
			d, err := driver.ParseDuration(v)
			if err != nil {
				return invalidURL("%s: %v", driver.ShowSetting(key, v), err)
			}
			if d < time.Millisecond || d > time.Minute {
				return invalidURL("election_timeout=%q: want the cluster's --election-timeout as a duration from 1ms to 1m, like 1s", v)
			}
			c.cfg.ElectionTimeout = d
		default:
			return invalidURL("unknown query key %q (etcd URLs know prefix, dial_timeout and election_timeout, and dlock's ttl, wait, owner)", key)
		}
	}
	return nil
}

func invalidURL(format string, args ...any) error {
	return fmt.Errorf("%w: etcd URL: "+format, append([]any{dlock.ErrInvalidArgument}, args...)...)
}

// open is the driver.Opener registered for etcd://. The client it builds
// is closed with the Locker. Open fails within dial_timeout unless some
// endpoint answers, naming every endpoint and why it did not.
func open(ctx context.Context, raw string) (driver.Driver, error) {
	c, err := parseURL(raw)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.dialTimeout)
	defer cancel()
	if err := dialAny(ctx, c.endpoints, c.dialTimeout); err != nil {
		return nil, err
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   c.endpoints,
		Username:    c.username,
		Password:    c.password,
		DialTimeout: c.dialTimeout,
		Logger:      zap.NewNop(),
		Context:     context.WithoutCancel(ctx),
	})
	if err != nil {
		if isPermanent(err) {
			err = driver.Permanent(err)
		}
		return nil, fmt.Errorf("connect to etcd at %s: %w", strings.Join(c.endpoints, ","), err)
	}
	if err := statusAny(ctx, cli, c.endpoints, c.dialTimeout); err != nil {
		_ = cli.Close()
		return nil, err
	}
	d, err := c.cfg.newDriver(cli, true)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	d.dialTimeout = c.dialTimeout
	return d, nil
}

// dialAny connects to every endpoint over TCP at once and returns nil as
// soon as one accepts, else an error naming each endpoint and its cause
// ("connection refused", a DNS failure, no answer within the timeout).
func dialAny(ctx context.Context, endpoints []string, timeout time.Duration) error {
	return anyEndpoint(ctx, endpoints, "unreachable", timeout, func(ctx context.Context, ep string) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", ep)
		if err != nil {
			return err
		}
		return conn.Close()
	})
}

// statusAny asks every endpoint for its status at once and returns nil as
// soon as one answers: a member that accepts connections but does not
// answer (frozen, overloaded) fails here instead of at the first lock.
func statusAny(ctx context.Context, cli *clientv3.Client, endpoints []string, timeout time.Duration) error {
	return anyEndpoint(ctx, endpoints, "not answering", timeout, func(ctx context.Context, ep string) error {
		_, err := cli.Status(ctx, ep)
		return err
	})
}

// anyEndpoint runs try on every endpoint concurrently until one succeeds.
func anyEndpoint(ctx context.Context, endpoints []string, what string, timeout time.Duration, try func(context.Context, string) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(endpoints))
	for _, ep := range endpoints {
		go func() {
			err := try(ctx, ep)
			if err != nil {
				err = fmt.Errorf("%s: %s", ep, describe(ctx, err, timeout, " (dial_timeout)"))
			}
			errs <- err
		}()
	}
	var failed []string
	var permanent bool
	for range endpoints {
		err := <-errs
		if err == nil {
			return nil
		}
		permanent = permanent || isPermanent(err)
		failed = append(failed, err.Error())
	}
	err := fmt.Errorf("etcd %s: %s", what, strings.Join(failed, "; "))
	if permanent {
		return driver.Permanent(err)
	}
	return err
}

// describe says why one endpoint failed, in a few words.
func describe(ctx context.Context, err error, timeout time.Duration, what string) string {
	var op *net.OpError
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case isCtxErr(err) || ctx.Err() != nil:
		return fmt.Sprintf("no answer within %s%s", timeout, what)
	case errors.As(err, &op) && op.Err != nil:
		return op.Err.Error()
	}
	return err.Error()
}

var _ driver.SettingsReporter = (*etcdDriver)(nil)

// Settings implements driver.SettingsReporter: prefix and
// election_timeout, and dial_timeout when opened from a URL.
func (d *etcdDriver) Settings() map[string]string {
	s := map[string]string{"prefix": d.keys.prefix, "election_timeout": d.election.String()}
	if d.dialTimeout > 0 {
		s["dial_timeout"] = d.dialTimeout.String()
	}
	return s
}
