package dlock

import (
	"context"
	"errors"

	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
)

// EnvURL names the environment variable Open reads when given "".
const EnvURL = "DLOCK_URL"

var registry = struct {
	sync.RWMutex
	openers map[string]driver.Opener
}{openers: map[string]driver.Opener{}}

// Register makes a driver available to Open under a URL scheme. Driver
// packages call it from init; it panics on a duplicate scheme, which is a
// programming error caught at start-up.
func Register(scheme string, open driver.Opener) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.openers[scheme]; dup {
		panic("dlock: Register called twice for scheme " + scheme)
	}
	registry.openers[scheme] = open
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registry.RLock()
	defer registry.RUnlock()
	s := make([]string, 0, len(registry.openers))
	for k := range registry.openers {
		s = append(s, k)
	}
	slices.Sort(s)
	return s
}

// DefaultURL is the embedded default backend: a SQLite file at
// $XDG_STATE_HOME/dlock/dlock.db, or ~/.local/state/dlock/dlock.db.
func DefaultURL() (string, error) {
	dir := os.Getenv("XDG_STATE_HOME")
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("dlock: no %s, XDG_STATE_HOME or home directory for the default lock file: %w", EnvURL, err)
		}
		dir = filepath.Join(home, ".local", "state")
	}
	u := url.URL{Scheme: "file", Path: filepath.Join(dir, "dlock", "dlock.db")}
	return u.String(), nil
}

// Open connects to the backend named by rawURL and returns a Locker.
//
// An empty rawURL reads DLOCK_URL, and when that is empty too opens
// DefaultURL (the embedded SQLite file). The scheme picks the driver, which
// must have been imported (blank-import the driver package, or
// github.com/dlockdev/dlock/backends for all of them):
//
//	redis://, rediss://     single Redis or Cluster (package redislock)
//	redlock://              Redlock over N Redis nodes (package redlock)
//	postgres://, postgresql://  lease table or advisory locks (package pglock)
//	etcd://                 etcd (package etcdlock)
//	zk://                   ZooKeeper (package zklock)
//	file://                 embedded SQLite (package filelock)
//	mem://                  in-process, for tests and examples (package memlock)
//
// The query keys ttl, wait and owner set the Locker's defaults (same meaning
// as WithTTL, WithWait, WithOwner) and are removed before the driver sees
// the URL; a driver rejects keys it does not know. migrate=auto creates the
// backend's schema (Locker.Migrate) before Open returns; the default, off,
// leaves schema changes to an explicit `dlock migrate` or Locker.Migrate,
// since the role an application runs as should not need DDL rights. Options given here
// override the URL's. Passwords never appear in returned errors.
func Open(ctx context.Context, rawURL string, opts ...Option) (*Locker, error) {
	rawURL, err := resolveURL(rawURL)
	if err != nil {
		return nil, err
	}
	u, open, err := lookupOpener(rawURL)
	if err != nil {
		return nil, err
	}
	urlOpts, rest, migrate, err := commonQuery(u)
	if err != nil {
		return nil, err
	}
	if s := defaultSettings().with(opts); s.logger != nil {
		ctx = driver.ContextWithLogger(ctx, s.logger)
	}
	drv, err := open(ctx, rest)
	if err != nil {
		return nil, redactErr(fmt.Errorf("dlock: open %s: %w", Redact(rawURL), err), rawURL)
	}
	l, err := newLocker(drv, append(urlOpts, opts...))
	if err != nil {
		_ = drv.Close()
		return nil, err
	}
	l.backend = u.Scheme
	if migrate {
		if err := l.Migrate(ctx); err != nil {
			_ = l.Close()
			return nil, redactErr(err, rawURL)
		}
	}
	return l, nil
}

// resolveURL applies Open's fallbacks to an empty URL: $DLOCK_URL, then
// DefaultURL.
func resolveURL(rawURL string) (string, error) {
	if rawURL == "" {
		rawURL = os.Getenv(EnvURL)
	}
	if rawURL == "" {
		return DefaultURL()
	}
	return rawURL, nil
}

// lookupOpener parses rawURL and finds the opener registered for its
// scheme.
func lookupOpener(rawURL string) (*url.URL, driver.Opener, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, invalid("malformed URL %s: %v", Redact(rawURL), parseReason(err))
	}
	if u.Scheme == "" {
		return nil, nil, invalid("URL %s has no scheme (want one of %s)", Redact(rawURL), strings.Join(Schemes(), ", "))
	}
	registry.RLock()
	open := registry.openers[u.Scheme]
	registry.RUnlock()
	if open == nil {
		return nil, nil, unknownScheme(u.Scheme)
	}
	return u, open, nil
}

// parseReason drops the URL that url.Parse echoes (it may hold a password).
func parseReason(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return errors.New("unparseable")
}

// commonQuery takes the portable query keys out of u; migrate reports
// migrate=auto.
func commonQuery(u *url.URL) (opts []Option, rest string, migrate bool, err error) {
	q := u.Query()
	for _, key := range []string{"ttl", "wait"} {
		if !q.Has(key) {
			continue
		}
		d, err := time.ParseDuration(q.Get(key))
		if err != nil {
			return nil, "", false, invalid("URL query %s=%q: not a duration like 30s or 500ms", key, q.Get(key))
		}
		if key == "ttl" {
			opts = append(opts, WithTTL(d))
		} else {
			opts = append(opts, WithWait(d))
		}
		q.Del(key)
	}
	if q.Has("owner") {
		opts = append(opts, WithOwner(q.Get("owner")))
		q.Del("owner")
	}
	if q.Has("migrate") {
		switch v := q.Get("migrate"); v {
		case "auto":
			migrate = true
		case "off":
		default:
			return nil, "", false, invalid("URL query migrate=%q: want auto or off", v)
		}
		q.Del("migrate")
	}
	v := *u
	driver.StripQuery(&v, "ttl", "wait", "owner", "migrate")
	return opts, v.String(), migrate, nil
}

// Redact returns rawURL with any password replaced by "xxxxx", for errors
// and logs. It leaves unparseable input as a bare scheme-less marker rather
// than risk printing a secret.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "<unparseable URL>"
	}
	q := u.Query()
	changed := false
	for _, k := range []string{"password", "pass"} {
		if q.Has(k) {
			q.Set(k, "xxxxx")
			changed = true
		}
	}
	if changed {
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// redactErr scrubs the URL's password from err's message wherever a
// backend client may have echoed it.
func redactErr(err error, rawURL string) error {
	secrets := urlSecrets(rawURL)
	if err == nil || len(secrets) == 0 {
		return err
	}
	return &redactedError{err: err, secrets: secrets}
}

func urlSecrets(rawURL string) []string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil
	}
	var s []string
	if p, ok := u.User.Password(); ok && p != "" {
		s = append(s, p, url.QueryEscape(p), url.PathEscape(p))
	}
	for _, k := range []string{"password", "pass"} {
		if p := u.Query().Get(k); p != "" {
			s = append(s, p, url.QueryEscape(p))
		}
	}
	return s
}

type redactedError struct {
	err     error
	secrets []string
}

func (e *redactedError) Error() string {
	msg := e.err.Error()
	for _, s := range e.secrets {
		msg = strings.ReplaceAll(msg, s, "xxxxx")
	}
	return msg
}

func (e *redactedError) Unwrap() error { return e.err }

// backendsImport is the package that registers every bundled backend.
const backendsImport = `import _ "github.com/dlockdev/dlock/backends"`

// unknownScheme names the fix: the import that registers the scheme.
func unknownScheme(scheme string) error {
	registered := Schemes()
	if len(registered) == 0 {
		return invalid("unknown URL scheme %q: no backend is registered; add %s (every bundled backend) or the one driver package's import", scheme, backendsImport)
	}
	return invalid("unknown URL scheme %q (registered: %s); forgotten import? %s registers every bundled backend", scheme, strings.Join(registered, ", "), backendsImport)
}
