package redlock

import (
	"context"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/redis/go-redis/v9"
)

// open builds a driver from
//
//	redlock://[user:password@]host1:port1,host2:port2,host3:port3[/db][?query]
//
// Every node gets the same user, password, database and go-redis query
// options (dial_timeout, pool_size...; see redis.ParseURL); the driver's
// own keys are node_timeout (a duration), fencing (true/false), tls
// (true: connect as rediss://) and context_timeout_enabled (go-redis's
// ContextTimeoutEnabled, which its ParseURL does not read; default true).
// Unknown keys are rejected.
func open(_ context.Context, rawURL string) (driver.Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, invalid("malformed URL")
	}
	// Strictly: go-redis's own parser (URL.Query) drops a pair with a
	// ';' and keeps the last of a repeated key without a word.
	q, err := driver.ParseQuery(u.RawQuery)
	if err == nil {
		err = driver.Unique(q)
	}
	if err != nil {
		return nil, invalid("%v", err)
	}
	ctxTimeout := true
	if q.Has("context_timeout_enabled") {
		v, perr := strconv.ParseBool(q.Get("context_timeout_enabled"))
		if perr != nil {
			return nil, invalid("URL query context_timeout_enabled=%q: want true or false", q.Get("context_timeout_enabled"))
		}
		ctxTimeout = v
		q.Del("context_timeout_enabled")
	}
	cfg, scheme, rest, err := ownQuery(q)
	if err != nil {
		return nil, err
	}
	resolved, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	clients, err := nodeClients(u, scheme, rest, ctxTimeout)
	if err != nil {
		return nil, err
	}
	d, err := newDriver(clients, resolved)
	if err != nil {
		closeAll(clients)
		return nil, err
	}
	d.owned = true
	d.tls = scheme == "rediss"
	d.ctxTimeout = ctxTimeout
	return d, nil
}

// nodeClients builds one client per host of u's host list, each with u's
// user, password and database and the go-redis query keys in rest.
func nodeClients(u *url.URL, scheme string, rest url.Values, ctxTimeout bool) ([]redis.UniversalClient, error) {
	hosts, err := hostList(u.Host)
	if err != nil {
		return nil, err
	}
	rediscore.RouteLogs()
	clients := make([]redis.UniversalClient, 0, len(hosts))
	for _, h := range hosts {
		node := url.URL{Scheme: scheme, User: u.User, Host: h, Path: u.Path, RawQuery: rest.Encode()}
		o, err := redis.ParseURL(node.String())
		if err == nil {
			rediscore.HideSecret(o.Password)
			err = rediscore.CheckOptions(o)
		}
		if err != nil {
			closeAll(clients)
			return nil, invalid("node %s: %v", h, err)
		}
		o.ContextTimeoutEnabled = ctxTimeout
		clients = append(clients, redis.NewClient(o))
	}
	return clients, nil
}

// ownQuery takes the driver's keys out of q, into a Config and the
// nodes' URL scheme.
func ownQuery(q url.Values) (Config, string, url.Values, error) {
	var cfg Config
	scheme := "redis"
	if q.Has("node_timeout") {
		d, err := driver.ParseDuration(q.Get("node_timeout"))
		if err != nil {
			return cfg, "", nil, invalid("URL query %s: %v", driver.ShowSetting("node_timeout", q.Get("node_timeout")), err)
		}
		if d <= 0 {
			return cfg, "", nil, invalid("URL query node_timeout=%q: want a positive duration like 50ms", q.Get("node_timeout"))
		}
		cfg.NodeTimeout = d
	}
	for _, key := range []string{"fencing", "tls"} {
		if !q.Has(key) {
			continue
		}
		on, err := strconv.ParseBool(q.Get(key))
		if err != nil {
			return cfg, "", nil, invalid("URL query %s=%q: want true or false", key, q.Get(key))
		}
		if key == "fencing" {
			cfg.NoFencing = !on
		} else if on {
			scheme = "rediss"
		}
	}
	for _, key := range []string{"node_timeout", "fencing", "tls"} {
		q.Del(key)
	}
	return cfg, scheme, q, nil
}

// hostList splits a libpq-style host list; a host without a port gets
// 6379. The same host:port twice is an invalid argument.
func hostList(list string) ([]string, error) {
	if list == "" {
		return nil, invalid("URL has no hosts (want redlock://host1:port1,host2:port2,host3:port3)")
	}
	var hosts []string
	seen := map[string]bool{}
	for _, h := range strings.Split(list, ",") {
		if h == "" {
			return nil, invalid("empty host in the host list %q", list)
		}
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(h, "6379")
		}
		if seen[strings.ToLower(h)] {
			return nil, invalid("host %s appears twice in the host list", h)
		}
		seen[strings.ToLower(h)] = true
		hosts = append(hosts, h)
	}
	return hosts, nil
}

func closeAll(clients []redis.UniversalClient) {
	for _, c := range clients {
		_ = c.Close()
	}
}

var _ driver.SettingsReporter = (*redlock)(nil)

// Settings implements driver.SettingsReporter: the driver's URL keys in
// force.
func (d *redlock) Settings() map[string]string {
	return map[string]string{
		"node_timeout": d.cfg.nodeTimeout.String(), "fencing": strconv.FormatBool(d.cfg.fencing),
		"tls": strconv.FormatBool(d.tls), "context_timeout_enabled": strconv.FormatBool(d.ctxTimeout),
	}
}
