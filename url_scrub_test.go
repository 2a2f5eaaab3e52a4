package dlock

import (
	"errors"
	"testing"
)

// TestScrubShortPassword: a short password is scrubbed where a client
// library would echo it, between delimiters, and nowhere else: a
// one-letter password replaced inside every word made the message
// unreadable ("poxxxxxtgrexxxxx URL: a query key ixxxxx neither ...").
func TestScrubShortPassword(t *testing.T) {
	for _, c := range []struct{ secret, msg, want string }{
		{"s", `postgres URL: a query key is unknown: "0pAss0000"`, `postgres URL: a query key is unknown: "0pAss0000"`},
		{"s", "connect to u:s@h: password=s refused", "connect to u:xxxxx@h: password=xxxxx refused"},
		{"pw", "pw", "xxxxx"},
		{"pw", "upw pwd (pw)", "upw pwd (xxxxx)"},
		{"s3cretPW", "auth s3cretPWx failed", "auth xxxxxx failed"},
	} {
		err := &redactedError{err: errors.New(c.msg), secrets: []string{c.secret}}
		if got := err.Error(); got != c.want {
			t.Errorf("scrub %q from %q = %q, want %q", c.secret, c.msg, got, c.want)
		}
	}
}
