package backends_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/backends"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// A URL names all its settings or fails. Every scheme's opener, against a
// real server, is given URLs whose query the fuzzer writes: Open either
// refuses with an invalid-argument error that names a part of the query,
// or opens with exactly the settings the query names — each of dlock's
// and the driver's keys in force with the value given
// (Locker.Settings), every other key one the client library the URL is
// passed on to knows (go-redis refuses the rest itself; pgx sends the
// rest to PostgreSQL, which refuses what it does not know).

// base is one backend's URL without a query.
type base struct {
	scheme, url string
	// clientKeys are the keys the driver passes on to its client library,
	// which reads them itself; nil when the driver passes none on.
	clientKeys []string
	// anyClientKey: the client library passes unknown keys to the server,
	// which is the judge (pgx: run-time parameters).
	anyClientKey bool
	// pathSuffix: the suffix may change the URL's path (Redis: /DB;
	// ZooKeeper: the root).
	pathSuffix bool
}

// goRedisKeys are go-redis v9's URL keys (options.go setupConnParams and
// osscluster.go setupClusterQueryParams).
var goRedisKeys = []string{
	"db", "protocol", "client_name", "max_retries", "min_retry_backoff", "max_retry_backoff",
	"dial_timeout", "read_timeout", "write_timeout", "pool_fifo", "pool_size", "pool_timeout",
	"min_idle_conns", "max_idle_conns", "max_active_conns", "max_concurrent_dials",
	"pipeline_pool_size", "pipeline_read_buffer_size", "pipeline_write_buffer_size",
	"conn_max_idle_time", "idle_timeout", "conn_max_lifetime", "max_conn_age",
	"conn_max_lifetime_jitter", "skip_verify", "addr", "max_redirects", "read_only",
	"route_by_latency", "route_randomly", "route_by_latency_tolerance", "dialer_retries",
	"dialer_retry_timeout", "failing_timeout_seconds",
}

func startBases(t testing.TB) []base {
	r1, r2, r3 := testserver.Redis(t), testserver.Redis(t), testserver.Redis(t)
	pg := testserver.Postgres(t)
	pgURL, _, _ := strings.Cut(pg.URL(), "?")
	return []base{
		{scheme: "mem", url: "mem://settings"},
		{scheme: "file", url: "file://" + filepath.Join(t.TempDir(), "settings.db")},
		{scheme: "redis", url: r1.URL(), clientKeys: goRedisKeys, pathSuffix: true},
		{scheme: "redlock", url: "redlock://" + strings.Join([]string{r1.Addr, r2.Addr, r3.Addr}, ","), clientKeys: goRedisKeys},
		// sslmode=disable rides along in every Postgres query (the test
		// server has no TLS).
		{scheme: "postgres", url: pgURL + "?sslmode=disable", anyClientKey: true},
		{scheme: "etcd", url: strings.Split(testserver.Etcd(t).URL(), "?")[0]},
		{scheme: "zk", url: testserver.ZooKeeper(t).URL(), pathSuffix: true},
	}
}

// seeds are the suffixes every scheme is tried with, and those of one
// scheme; each holds a setting a user writes, right or wrong.
var seeds = map[string][]string{
	"": {
		"?ttl=5s", "?ttl=1s&ttl=5s", "?ttl=5s;", "?wait=forever", "?wait=0&owner=me", "?owner=a&owner=b",
		"?ttl=9999999999h", "?x=%zz", "?;", "?&&ttl=2s&", "?migrate=sometimes", "?bogus=1",
	},
	"mem":  {"?owner=%E2%80%AEevil"},
	"file": {"?sync=full;", "?sync=full&retention=1h", "?retention=", "?sync=full&sync=normal"},
	"redis": {
		"?fair=false;x", "?fair=false", "?prefix=app:&fair=true&replica_sync=0", "/-1", "/3", "?db=-1",
		"?pool_size=-5", "?protocol=5", "?dial_timeout=2s&dial_timeout=3s", "?prefix=", "?replica_timeout=500ms",
		"?context_timeout_enabled=false", "?cluster=false",
	},
	"redlock": {"?node_timeout=50ms;", "?node_timeout=80ms&fencing=false", "?tls=false", "?pool_size=-1"},
	"postgres": {
		"&mode=advisory;", "&table=mytable;", "&mode=advisory", "&mode=lease&table=app_locks", "&mode=advsory",
		"&application_name=settings", "&nosuchkey=1", "&statement_timeout=abc", "&dlock_x=1", "&mode=",
		"&application_name=a&application_name=b", "&password=s3cret;x",
	},
	"etcd": {"?election_timeout=300ms;", "?election_timeout=300ms", "?prefix=p/", "?dial_timeout=5s", "?election_timeout=0s"},
	"zk":   {"?session_timeout=3s;", "?session_timeout=3s", "?dial_timeout=2s", "/app?session_timeout=4s"},
}

// TestURLSettingsInForce runs every example URL through the fuzz body's
// checks, and checks the outcome the examples above must have.
func TestURLSettingsInForce(t *testing.T) {
	bases := startBases(t)
	must := map[string]bool{ // raw URL suffix → opens
		"?fair=false;x": false, "&mode=advisory;": false, "&table=mytable;": false,
		"?election_timeout=300ms;": false, "?session_timeout=3s;": false, "?ttl=1s&ttl=5s": false,
		"/-1": false, "&nosuchkey=1": false, "&mode=advisory": true, "?fair=false": true,
		"?election_timeout=300ms": true, "?session_timeout=3s": true, "?sync=full&retention=1h": true,
	}
	for _, b := range bases {
		for _, suffix := range append(slices.Clone(seeds[""]), seeds[b.scheme]...) {
			if b.scheme == "postgres" && strings.HasPrefix(suffix, "?") {
				suffix = "&" + suffix[1:]
			}
			t.Run(b.scheme+suffix, func(t *testing.T) {
				opened := checkOpen(t, b, suffix)
				if want, ok := must[suffix]; ok && opened != want {
					t.Errorf("%s%s: opened = %t, want %t", b.url, suffix, opened, want)
				}
			})
		}
	}
}

// FuzzURLSettings: `go test -fuzz FuzzURLSettings ./backends` writes
// queries for every scheme (which picks the backend).
func FuzzURLSettings(f *testing.F) {
	bases := startBases(f)
	for i, b := range bases {
		for _, s := range append(slices.Clone(seeds[""]), seeds[b.scheme]...) {
			f.Add(uint8(i), s)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, suffix string) {
		b := bases[int(which)%len(bases)]
		switch {
		case b.scheme == "postgres":
			suffix = "&" + strings.TrimPrefix(suffix, "?")
		case !b.pathSuffix || !strings.HasPrefix(suffix, "/"):
			suffix = "?" + strings.TrimPrefix(suffix, "?")
		}
		checkOpen(t, b, suffix)
	})
}

// checkOpen opens b's URL with suffix and checks the rule; it reports
// whether the URL opened.
func checkOpen(t *testing.T, b base, suffix string) bool {
	t.Helper()
	raw := b.url + suffix
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type opened struct {
		l   *dlock.Locker
		err error
	}
	done := make(chan opened, 1)
	go func() {
		l, err := dlock.Open(ctx, raw)
		done <- opened{l, err}
	}()
	var o opened
	select {
	case o = <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("Open(%q) hangs: no answer 20s past its deadline", raw)
	}
	l, err := o.l, o.err
	if ctx.Err() != nil {
		t.Fatalf("Open(%q) ran past its 10s deadline: %v", raw, err)
	}
	for _, secret := range passwords(raw) {
		if strings.Contains(fmt.Sprint(err), secret) {
			t.Fatalf("Open(%q) echoes the password %q: %v", raw, secret, err)
		}
	}
	u, perr := url.Parse(raw)
	if perr != nil {
		if !errors.Is(err, dlock.ErrInvalidArgument) {
			t.Fatalf("Open(%q) of an unparseable URL = %v, want an invalid argument", raw, err)
		}
		return false
	}
	q, qerr := driver.ParseQuery(u.RawQuery)
	if qerr == nil {
		qerr = driver.Unique(q, "addr")
	}
	switch {
	case err == nil:
		defer l.Close()
		if qerr != nil {
			t.Fatalf("Open(%q) opened a URL whose query does not read whole: %v", raw, qerr)
		}
		checkSettings(t, b, raw, q, l.Settings())
		return true
	case errors.Is(err, dlock.ErrInvalidArgument):
		if !namesAPart(err.Error(), u, q) {
			t.Fatalf("Open(%q) = %v: the error names no part of the URL's query or path", raw, err)
		}
	case qerr != nil:
		t.Fatalf("Open(%q) failed with %v, not an invalid argument, on a query that does not read whole (%v)", raw, err, qerr)
	}
	return false
}

// passwords returns the passwords raw holds (its user info's, the values
// of query keys that name one) that appear nowhere else in it, so that
// finding one in an error can only be an echo.
func passwords(raw string) []string {
	var found []string
	rest := raw
	if u, err := url.Parse(raw); err == nil {
		if p, ok := u.User.Password(); ok {
			found = append(found, p)
		}
		rest = strings.Replace(raw, u.User.String(), "", 1)
	}
	for _, pair := range strings.Split(rest[strings.Index(rest, "?")+1:], "&") {
		if k, v, ok := strings.Cut(pair, "="); ok && strings.Contains(strings.ToLower(k), "pass") {
			found = append(found, strings.TrimSuffix(v, ";x"))
			rest = strings.Replace(rest, pair, "", 1)
		}
	}
	var keep []string
	for _, p := range found {
		if len(p) >= 4 && !strings.Contains(rest, p) {
			keep = append(keep, p)
		}
	}
	return keep
}

// checkSettings: every key of q is in force with its value, or is one
// the client library reads.
func checkSettings(t *testing.T, b base, raw string, q url.Values, got map[string]string) {
	t.Helper()
	for key, vals := range q {
		v, ok := got[key]
		switch {
		case ok && !sameSetting(v, vals[0]):
			t.Errorf("Open(%q): %s=%q in force, the URL says %q", raw, key, v, vals[0])
		case !ok && !b.anyClientKey && !slices.Contains(b.clientKeys, key):
			t.Errorf("Open(%q) opened with key %q that neither dlock, the driver nor its client library reads", raw, key)
		}
	}
}

// sameSetting compares a setting in force with the URL's text: as
// durations or booleans when both read as such, else as text.
func sameSetting(inForce, given string) bool {
	if inForce == given {
		return true
	}
	if a, err := time.ParseDuration(inForce); err == nil {
		b, err := time.ParseDuration(given)
		return err == nil && a == b
	}
	if a, err := strconv.ParseBool(inForce); err == nil {
		b, err := strconv.ParseBool(given)
		return err == nil && a == b
	}
	return false
}

// namesAPart reports whether msg names one of the query's keys or raw
// pairs, or the URL's path: the part Open refused.
func namesAPart(msg string, u *url.URL, q url.Values) bool {
	var parts []string
	if u.Path != "" && u.Path != "/" {
		parts = append(parts, u.Path, strings.Trim(u.Path, "/"), path.Clean(u.Path))
	}
	for _, p := range strings.Split(u.RawQuery, "&") {
		parts = append(parts, p)
		k, _, _ := strings.Cut(p, "=")
		parts = append(parts, k)
	}
	for k := range q {
		parts = append(parts, k)
	}
	for _, p := range parts {
		if p == "" {
			continue
		}
		quoted := strconv.Quote(p)
		if strings.Contains(msg, p) || strings.Contains(msg, quoted[1:len(quoted)-1]) || (len([]rune(p)) > 64 && strings.Contains(msg, string([]rune(p)[:64]))) {
			return true
		}
	}
	return u.RawQuery == "" && u.Path == ""
}
