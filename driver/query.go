package driver

import (
	"net/url"
	"slices"
	"strings"
)

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
