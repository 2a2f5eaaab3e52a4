package driver

import (
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// A URL names all its settings or fails: Go's URL.Query drops a pair that
// holds a ';' without a word, and keeps the first of a repeated key where
// go-redis and pgx keep the last. Either way a setting the user wrote is
// silently not the one in force (advisory mode falling back to lease mode,
// a different lock space). ParseQuery and Unique are the strict reading
// dlock.Open and every driver use instead.

// ParseQuery parses a URL's raw query strictly. A pair with a ';', a bad
// %-escape or no key is an error naming the pair (a password's value is
// shown as xxxxx). Empty pairs (a&&b) are skipped. Repeated keys are kept
// in order; Unique refuses them where a setting may be given once.
func ParseQuery(rawQuery string) (url.Values, error) {
	q := url.Values{}
	for _, pair := range strings.Split(rawQuery, "&") {
		if pair == "" {
			continue
		}
		if strings.Contains(pair, ";") {
			return nil, fmt.Errorf("query %s has a ';': separate settings with '&' (a ';' inside a value is written %%3B)", showPair(pair))
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("query %s: bad %%-escape in the key", showPair(pair))
		}
		val, err := url.QueryUnescape(v)
		if err != nil {
			return nil, fmt.Errorf("query %s: bad %%-escape in the value", showPair(pair))
		}
		if key == "" {
			return nil, fmt.Errorf("query %s has no key", showPair(pair))
		}
		q.Add(key, val)
	}
	return q, nil
}

// Unique refuses a key given more than once, but for the keys in
// repeatable (go-redis's addr, one per Cluster node).
func Unique(q url.Values, repeatable ...string) error {
	for _, key := range slices.Sorted(maps.Keys(q)) {
		if vals := q[key]; len(vals) > 1 && !slices.Contains(repeatable, key) {
			return fmt.Errorf("query key %q is given %d times (%s): give each setting once", key, len(vals), showValues(key, vals))
		}
	}
	return nil
}

// secretKey reports whether a query key holds a password, whose value no
// error may show.
func secretKey(key string) bool {
	return strings.Contains(strings.ToLower(key), "pass")
}

// maxShown bounds a value quoted in an error.
const maxShown = 64

// showPair quotes one raw key=value pair for an error message.
func showPair(pair string) string {
	k, v, hasValue := strings.Cut(pair, "=")
	if key, err := url.QueryUnescape(k); (err == nil && secretKey(key)) || secretKey(k) {
		if hasValue {
			v = "xxxxx"
		}
	}
	if !hasValue {
		return fmt.Sprintf("%q", clip(k))
	}
	return fmt.Sprintf("%q", clip(k+"="+v))
}

func showValues(key string, vals []string) string {
	shown := make([]string, len(vals))
	for i, v := range vals {
		shown[i] = ShowSetting(key, v)
	}
	return strings.Join(shown, ", ")
}

// ShowSetting renders a URL setting for an error message: key="value",
// the value cut to 64 characters, and xxxxx for a password.
func ShowSetting(key, value string) string {
	if secretKey(key) {
		value = "xxxxx"
	}
	return fmt.Sprintf("%s=%q", key, clip(value))
}

// clip shortens s for an error message.
func clip(s string) string {
	if r := []rune(s); len(r) > maxShown {
		return string(r[:maxShown]) + "…"
	}
	return s
}

// durationSyntax is what time.ParseDuration reads; a string that matches
// it and still fails to parse is out of range.
var durationSyntax = regexp.MustCompile(`^[-+]?((\d+(\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h))+$|^[-+]?0$`)

// bareNumber is a duration written without its unit.
var bareNumber = regexp.MustCompile(`^[-+]?\d{1,12}(\.\d{1,6})?$`)

// ErrDurationRange is wrapped by ParseDuration's error for a duration
// longer than time.Duration holds (about 292 years).
var ErrDurationRange = errors.New("longer than the longest duration, 2562047h47m16s")

var errNotDuration = errors.New("not a duration like 30s, 500ms or 1h30m")

// ParseDuration is time.ParseDuration with an error that says what is
// wrong with s: not a duration at all, or one that time.Duration cannot
// hold (time.ParseDuration calls both "invalid duration"; converting an
// overflowing number by hand would wrap around instead). The error does
// not repeat s: callers name the setting and its value (key="s": ...).
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err == nil {
		return d, nil
	}
	if durationSyntax.MatchString(s) {
		return 0, ErrDurationRange
	}
	if bareNumber.MatchString(s) {
		return 0, fmt.Errorf("missing unit: write %ss, %sms or %sm", s, s, s)
	}
	return 0, errNotDuration
}

// StripQuery removes the query keys keys from u, leaving every other
// parameter exactly as written. Re-encoding the query instead
// (url.Values.Encode) would rewrite what the backend's own URL parser
// reads, e.g. a space written %20 in a Postgres `options` value as "+",
// which libpq-style parsers take literally.
func StripQuery(u *url.URL, keys ...string) {
	if u.RawQuery == "" {
		return
	}
	parts := strings.Split(u.RawQuery, "&")
	kept := parts[:0]
	for _, p := range parts {
		k, _, _ := strings.Cut(p, "=")
		if uk, err := url.QueryUnescape(k); err == nil && slices.Contains(keys, uk) {
			continue
		}
		kept = append(kept, p)
	}
	u.RawQuery = strings.Join(kept, "&")
}
