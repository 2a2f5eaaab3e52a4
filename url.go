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
	"unicode"
	"unicode/utf8"

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
	if err := schemeless(rawURL); err != nil {
		return nil, nil, err
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, nil, invalid("malformed URL %s: %v", Redact(rawURL), parseReason(err))
	}
	if u.Scheme == "" {
		return nil, nil, invalid("URL %s has no scheme (want one of %s)", Redact(rawURL), strings.Join(knownSchemes(), ", "))
	}
	registry.RLock()
	open := registry.openers[u.Scheme]
	registry.RUnlock()
	if open == nil {
		return nil, nil, unknownScheme(u.Scheme)
	}
	if err := missingHost(u); err != nil {
		return nil, nil, err
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

// commonKeys are the query keys Open reads itself, for every backend.
var commonKeys = []string{"ttl", "wait", "owner", "migrate"}

// commonQuery takes the portable query keys out of u; migrate reports
// migrate=auto. The whole query is parsed strictly (driver.ParseQuery):
// a pair Go's URL.Query would drop, or one of these keys given twice, is
// an invalid argument, never a setting silently not in force.
func commonQuery(u *url.URL) (opts []Option, rest string, migrate bool, err error) {
	q, err := driver.ParseQuery(u.RawQuery)
	if err == nil {
		own := url.Values{}
		for _, k := range commonKeys {
			own[k] = q[k]
		}
		err = driver.Unique(own)
	}
	if err != nil {
		return nil, "", false, invalid("URL %s: %v", Redact(u.String()), err)
	}
	if q.Has("ttl") {
		d, err := driver.ParseDuration(q.Get("ttl"))
		if err != nil {
			return nil, "", false, invalid("URL query %s: %v", driver.ShowSetting("ttl", q.Get("ttl")), err)
		}
		opts = append(opts, WithTTL(d))
	}
	if q.Has("wait") {
		d, err := parseWait(q.Get("wait"))
		if err != nil {
			return nil, "", false, invalid("URL query %s: %v", driver.ShowSetting("wait", q.Get("wait")), err)
		}
		opts = append(opts, WithWait(d))
	}
	if q.Has("owner") {
		opts = append(opts, WithOwner(q.Get("owner")))
	}
	if q.Has("migrate") {
		switch v := q.Get("migrate"); v {
		case "auto":
			migrate = true
		case "off":
		default:
			return nil, "", false, invalid("URL query migrate=%s: want auto or off", quoteClip(v))
		}
	}
	v := *u
	driver.StripQuery(&v, commonKeys...)
	return opts, v.String(), migrate, nil
}

// parseWait reads a wait bound: a duration, or "forever" (Forever), the
// same words as the CLI's --wait.
func parseWait(s string) (time.Duration, error) {
	if s == "forever" {
		return Forever, nil
	}
	d, err := driver.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%w; for no bound say forever", err)
	}
	return d, nil
}

// Redact returns rawURL with any password replaced by "xxxxx", for errors
// and logs: the user info's, and the value of every query key that names
// one (password, pass, sslpassword), however malformed the pair. It leaves
// unparseable input as a bare scheme-less marker rather than risk
// printing a secret.
func Redact(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "<unparseable URL>"
	}
	if u.RawQuery != "" {
		pairs := strings.Split(u.RawQuery, "&")
		for i, p := range pairs {
			if k, _, ok := strings.Cut(p, "="); ok && secretQueryKey(k) {
				pairs[i] = k + "=xxxxx"
			}
		}
		u.RawQuery = strings.Join(pairs, "&")
	}
	return u.Redacted()
}

// secretQueryKey reports whether a raw query key names a password.
func secretQueryKey(k string) bool {
	if uk, err := url.QueryUnescape(k); err == nil {
		k = uk
	}
	return strings.Contains(strings.ToLower(k), "pass")
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
	for _, pair := range strings.Split(u.RawQuery, "&") {
		k, v, _ := strings.Cut(pair, "=")
		if v == "" || !secretQueryKey(k) {
			continue
		}
		s = append(s, v)
		if p, err := url.QueryUnescape(v); err == nil && p != v {
			s = append(s, p)
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
		msg = scrubSecret(msg, s)
	}
	return msg
}

// shortSecret is the length under which a password is scrubbed only
// where it stands alone: a client library echoes a password between
// delimiters (":pw@", "password=pw&"), and replacing a one-letter password
// inside every word would garble the message.
const shortSecret = 6

// scrubSecret replaces secret in msg by xxxxx.
func scrubSecret(msg, secret string) string {
	if len(secret) >= shortSecret {
		return strings.ReplaceAll(msg, secret, "xxxxx")
	}
	var b strings.Builder
	for {
		i := strings.Index(msg, secret)
		if i < 0 {
			b.WriteString(msg)
			return b.String()
		}
		end := i + len(secret)
		before, _ := utf8.DecodeLastRuneInString(msg[:i])
		after, _ := utf8.DecodeRuneInString(msg[end:])
		if wordRune(before) || wordRune(after) {
			b.WriteString(msg[:end])
		} else {
			b.WriteString(msg[:i] + "xxxxx")
		}
		msg = msg[end:]
	}
}

// wordRune reports whether r continues a word (utf8.RuneError, the
// start or end of the message, does not).
func wordRune(r rune) bool {
	return r != utf8.RuneError && (unicode.IsLetter(r) || unicode.IsDigit(r))
}

func (e *redactedError) Unwrap() error { return e.err }

// backendsImport is the package that registers every bundled backend.
const backendsImport = `import _ "github.com/dlockdev/dlock/backends"`
