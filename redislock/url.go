package redislock

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/rediscore"
	"github.com/dlockdev/dlock/internal/wireprobe"
	"github.com/redis/go-redis/v9"
)

// Scheme and SchemeTLS are the URL schemes this package registers with
// dlock.Open.
const (
	Scheme    = "redis"
	SchemeTLS = "rediss"
)

// The driver's own URL query keys; every other key goes to go-redis.
const (
	keyCluster        = "cluster"
	keyFair           = "fair"
	keyPrefix         = "prefix"
	keyReplicaSync    = "replica_sync"
	keyReplicaTimeout = "replica_timeout"
	// keyContextTimeout is go-redis's Options.ContextTimeoutEnabled, which
	// go-redis's own ParseURL does not read. The driver turns it on by
	// default for the clients it builds: without it a socket read ignores
	// the caller's deadline and waits out read_timeout and every retry.
	keyContextTimeout = "context_timeout_enabled"
)

func init() {
	dlock.Register(Scheme, open)
	dlock.Register(SchemeTLS, open)
}

// open is the driver.Opener: it builds a client from the URL, checks it
// with PING, and returns a driver that closes the client on Close.
func open(ctx context.Context, rawURL string) (driver.Driver, error) {
	client, cfg, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	// The Locker's logger (dlock.WithLogger, else slog.Default) gets
	// go-redis's lines from the first dial on, and the driver's warning.
	logger := driver.LoggerFrom(ctx)
	routeLogs(client, logger)
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		if wrong := wrongServer(client, err); wrong != nil {
			return nil, wrong
		}
		return nil, fmt.Errorf("redislock: connect: %w", scrub(err, rawURL))
	}
	d := newDriver(client, cfg, true)
	d.SetLogger(logger)
	d.prepare()
	return d.wrap(), nil
}

// wrongServer explains a failed PING that no Redis server sent (an EOF: a
// PostgreSQL server closes the connection on a first message it cannot
// read) when the address answers as PostgreSQL; it returns nil otherwise.
func wrongServer(client redis.UniversalClient, err error) error {
	var rerr redis.Error
	c, single := client.(*redis.Client)
	if !single || errors.As(err, &rerr) {
		return nil
	}
	o := c.Options()
	if !wireprobe.Postgres(o.Network, o.Addr) {
		return nil
	}
	return fmt.Errorf("redislock: the server at %s did not answer as Redis (it answered like PostgreSQL: is this a postgres:// address?); check the URL's host and port: %w", o.Addr, err)
}

// parseURL splits the driver's own query keys from go-redis's, and builds
// a Cluster client when the URL has addr keys or cluster=true.
func parseURL(rawURL string) (redis.UniversalClient, config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, config{}, invalidURL("malformed URL")
	}
	// Strictly: go-redis's own parser (URL.Query) drops a pair with a
	// ';' and keeps the last of a repeated key without a word.
	q, err := driver.ParseQuery(u.RawQuery)
	if err == nil {
		err = driver.Unique(q, "addr")
	}
	if err != nil {
		return nil, config{}, invalidURL(err.Error())
	}
	ctxTimeout := true
	if q.Has(keyContextTimeout) {
		if ctxTimeout, err = boolKey(q, keyContextTimeout); err != nil {
			return nil, config{}, err
		}
		q.Del(keyContextTimeout)
	}
	c, cluster, err := ownKeys(q)
	if err != nil {
		return nil, config{}, err
	}
	cfg, err := c.resolve()
	if err != nil {
		return nil, config{}, err
	}
	stripTaken(u, q)
	client, err := newClient(u.String(), rawURL, cluster, ctxTimeout)
	return client, cfg, err
}

// newClient builds the go-redis client of goURL, the URL without the
// driver's keys (rawURL, as given, is for errors with its password
// hidden): a Cluster client when cluster is set.
func newClient(goURL, rawURL string, cluster, ctxTimeout bool) (redis.UniversalClient, error) {
	if cluster {
		opt, err := redis.ParseClusterURL(goURL)
		if err == nil {
			err = rediscore.CheckClusterOptions(opt)
		}
		if err != nil {
			return nil, invalidURL(scrub(err, rawURL).Error())
		}
		opt.ContextTimeoutEnabled = ctxTimeout
		return redis.NewClusterClient(opt), nil
	}
	opt, err := redis.ParseURL(goURL)
	if err == nil {
		err = rediscore.CheckOptions(opt)
	}
	if err != nil {
		return nil, invalidURL(scrub(err, rawURL).Error())
	}
	opt.ContextTimeoutEnabled = ctxTimeout
	return redis.NewClient(opt), nil
}

// ownKeys reads and removes the driver's keys into a Config; cluster
// reports whether the URL names a Cluster.
func ownKeys(q url.Values) (c Config, cluster bool, err error) {
	defer func() {
		for _, k := range []string{keyCluster, keyFair, keyPrefix, keyReplicaSync, keyReplicaTimeout} {
			q.Del(k)
		}
	}()
	if cluster, err = boolKey(q, keyCluster); err != nil {
		return c, false, err
	}
	if q.Has(keyFair) {
		fair, err := boolKey(q, keyFair)
		if err != nil {
			return c, false, err
		}
		c.NoFairQueue = !fair
	}
	if q.Has(keyPrefix) {
		if c.Prefix = q.Get(keyPrefix); c.Prefix == "" {
			return c, false, invalidURL(fmt.Sprintf("query prefix is empty: give a key prefix, or leave the key out for the default %q", rediscore.DefaultPrefix))
		}
	}
	if err := replicaKeys(q, &c); err != nil {
		return c, false, err
	}
	return c, cluster || q.Has("addr"), nil
}

// boolKey reads an optional true/false query key.
func boolKey(q url.Values, key string) (bool, error) {
	if !q.Has(key) {
		return false, nil
	}
	v, err := strconv.ParseBool(q.Get(key))
	if err != nil {
		return false, invalidURL(fmt.Sprintf("query %s=%q: want true or false", key, q.Get(key)))
	}
	return v, nil
}

// replicaKeys reads replica_sync and replica_timeout.
func replicaKeys(q url.Values, c *Config) error {
	var err error
	if q.Has(keyReplicaSync) {
		if c.ReplicaSync, err = strconv.Atoi(q.Get(keyReplicaSync)); err != nil {
			return invalidURL(fmt.Sprintf("query replica_sync=%q: want a number of replicas", q.Get(keyReplicaSync)))
		}
	}
	if q.Has(keyReplicaTimeout) {
		c.ReplicaTimeout, err = driver.ParseDuration(q.Get(keyReplicaTimeout))
		if err != nil {
			return invalidURL(fmt.Sprintf("query %s: %v", driver.ShowSetting(keyReplicaTimeout, q.Get(keyReplicaTimeout)), err))
		}
		if c.ReplicaTimeout <= 0 {
			return invalidURL(fmt.Sprintf("query replica_timeout=%q: want a positive duration like 500ms", q.Get(keyReplicaTimeout)))
		}
	}
	return nil
}

func invalidURL(reason string) error {
	return fmt.Errorf("%w: redis URL: %s (driver keys: cluster, fair, prefix, replica_sync, replica_timeout, "+
		"context_timeout_enabled; other keys are go-redis options such as dial_timeout or addr)", dlock.ErrInvalidArgument, reason)
}

// scrub returns err with the URL's password, if any, replaced by xxxxx.
func scrub(err error, rawURL string) error {
	u, perr := url.Parse(rawURL)
	if perr != nil {
		return err
	}
	pw, ok := u.User.Password()
	if !ok || pw == "" || !strings.Contains(err.Error(), pw) {
		return err
	}
	return scrubbed{err, strings.ReplaceAll(err.Error(), pw, "xxxxx")}
}

type scrubbed struct {
	err error
	msg string
}

func (e scrubbed) Error() string { return e.msg }
func (e scrubbed) Unwrap() error { return e.err }

// stripTaken removes from u's query the keys this package took out of q,
// leaving the rest as written for go-redis' own parser.
func stripTaken(u *url.URL, q url.Values) {
	var taken []string
	for k := range u.Query() {
		if !q.Has(k) {
			taken = append(taken, k)
		}
	}
	driver.StripQuery(u, taken...)
}

var (
	_ driver.SettingsReporter = (*redisDriver)(nil)
	_ driver.SettingsReporter = fairDriver{}
)

// Settings implements driver.SettingsReporter: the driver's URL keys in
// force (cluster and context_timeout_enabled describe the client).
func (d *redisDriver) Settings() map[string]string {
	_, cluster := d.client.(*redis.ClusterClient)
	return map[string]string{
		keyPrefix: d.cfg.prefix, keyFair: strconv.FormatBool(d.cfg.fair),
		keyReplicaSync: strconv.Itoa(d.cfg.replicas), keyReplicaTimeout: d.cfg.replicaTimeout.String(),
		keyCluster: strconv.FormatBool(cluster), keyContextTimeout: strconv.FormatBool(d.honours),
	}
}
