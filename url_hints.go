package dlock

import (
	"net/url"
	"regexp"
	"slices"
	"strings"

	"github.com/dlockdev/dlock/internal/suggest"
)

// The hints below turn the mistakes a new user makes in a URL into errors
// that name the fix. Every one is an invalid argument, and none prints a
// password.

// bundled maps each bundled backend's URL schemes to its driver package.
var bundled = map[string]string{
	"redis": "redislock", "rediss": "redislock", "redlock": "redlock",
	"postgres": "pglock", "postgresql": "pglock", "etcd": "etcdlock",
	"zk": "zklock", "file": "filelock", "mem": "memlock",
}

// defaultPorts picks the scheme an example names for a well-known port.
var defaultPorts = map[string]string{"5432": "postgres", "2379": "etcd", "2181": "zk"}

// hostPort matches "host:port" (a name, an IPv4 or a bracketed IPv6
// address, then a numeric port): what a URL's authority holds, and what a
// user gives when the scheme or its "//" is missing.
var hostPort = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.-]*):[0-9]{1,5}$`)

// schemeless explains a URL given without a scheme (host:port, or a file
// path), and returns nil for anything else.
func schemeless(rawURL string) error {
	if strings.Contains(rawURL, "://") {
		return nil
	}
	if strings.HasPrefix(rawURL, "/") {
		return invalid("no scheme in URL %q; for a lock file say file://%s", rawURL, rawURL)
	}
	authority, _, _ := strings.Cut(rawURL, "/")
	hp := authority[strings.LastIndex(authority, "@")+1:]
	if !hostPort.MatchString(hp) || isScheme(hp[:strings.Index(hp, ":")]) {
		return nil
	}
	shown := strings.TrimPrefix(Redact("x://"+rawURL), "x://")
	scheme := defaultPorts[hp[strings.LastIndex(hp, ":")+1:]]
	if scheme == "" {
		scheme = "redis"
	}
	return invalid("no scheme in URL %q; e.g. %s://%s (schemes: %s)", shown, scheme, shown, strings.Join(knownSchemes(), ", "))
}

// missingHost explains a URL whose host landed in its path or opaque part
// because of a missing "//" (redis:/127.0.0.1:6379, redis:127.0.0.1:6379,
// redis:/:pw@host). The URL is shown only as corrected and redacted: a
// password in the path is out of Redact's reach.
func missingHost(u *url.URL) error {
	if u.Host != "" || u.Scheme == "file" {
		return nil
	}
	rest := u.Opaque
	if rest == "" {
		rest = strings.TrimPrefix(u.Path, "/")
	}
	fixed, err := url.Parse(u.Scheme + "://" + rest)
	if err != nil || fixed.Host == "" {
		return nil
	}
	if !hostPort.MatchString(fixed.Host) && fixed.User == nil && fixed.Hostname() != "localhost" {
		return nil
	}
	fixed.RawQuery = u.RawQuery
	return invalid("URL has no host: the scheme needs \"//\" after its colon; did you mean %s?", Redact(fixed.String()))
}

// unknownScheme names the fix for a scheme no driver registered: the
// nearest registered scheme when it looks like a typo, the import that
// registers a bundled backend this program does not link in, and the
// schemes there are.
func unknownScheme(scheme string) error { return unknownSchemeOf(scheme, Schemes()) }

// unknownSchemeOf is unknownScheme for a program that registered the
// schemes registered.
func unknownSchemeOf(scheme string, registered []string) error {
	if near, ok := suggest.Closest(scheme, union(registered)); ok {
		if slices.Contains(registered, near) {
			return invalid("unknown URL scheme %q; did you mean %s? (schemes: %s)", scheme, near, strings.Join(registered, ", "))
		}
		return invalid("unknown URL scheme %q; did you mean %s? Its driver is not linked into this program: %s", scheme, near, importAdvice(near))
	}
	if _, ok := bundled[scheme]; ok {
		return invalid("URL scheme %q is not registered in this program; forgotten import? %s", scheme, importAdvice(scheme))
	}
	msg := "unknown URL scheme %q (schemes: %s)"
	if len(registered) == 0 {
		return invalid(msg+"; no backend is registered in this program: add %s", scheme, strings.Join(union(nil), ", "), backendsImport)
	}
	if missing := unregisteredBundled(registered); len(missing) > 0 {
		return invalid(msg+"; %s are bundled too: %s registers every bundled backend", scheme, strings.Join(registered, ", "), strings.Join(missing, ", "), backendsImport)
	}
	return invalid(msg, scheme, strings.Join(registered, ", "))
}

// importAdvice is the import that registers a bundled scheme.
func importAdvice(scheme string) string {
	return `add import _ "github.com/dlockdev/dlock/` + bundled[scheme] + `", or ` + backendsImport + ` for every bundled backend`
}

// knownSchemes are the registered and the bundled schemes, sorted.
func knownSchemes() []string { return union(Schemes()) }

// union is registered plus the bundled schemes, sorted.
func union(registered []string) []string {
	s := slices.Clone(registered)
	for k := range bundled {
		if !slices.Contains(s, k) {
			s = append(s, k)
		}
	}
	slices.Sort(s)
	return s
}

// unregisteredBundled lists the bundled schemes not in registered.
func unregisteredBundled(registered []string) []string {
	var m []string
	for k := range bundled {
		if !slices.Contains(registered, k) {
			m = append(m, k)
		}
	}
	slices.Sort(m)
	return m
}

// isScheme reports whether s is a registered or bundled scheme.
func isScheme(s string) bool { return slices.Contains(knownSchemes(), strings.ToLower(s)) }
