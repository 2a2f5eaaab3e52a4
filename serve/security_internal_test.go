package serve

import (
	"net/http"
	"slices"
	"testing"
)

// TestSecurityHeadersShareNothingWritable: the header values every answer
// shares are never changed through one answer: a handler adding to one
// of them leaves the next answer's as it was. Setting them allocates
// nothing.
func TestSecurityHeadersShareNothingWritable(t *testing.T) {
	first := http.Header{}
	securityHeaders(first)
	first.Add("Content-Security-Policy", "img-src *")
	first.Set("X-Frame-Options", "SAMEORIGIN")
	next := http.Header{}
	securityHeaders(next)
	if got := next.Values("Content-Security-Policy"); !slices.Equal(got, []string{apiCSP}) {
		t.Errorf("the next answer's Content-Security-Policy is %q, want only %q", got, apiCSP)
	}
	if got := next.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("the next answer's X-Frame-Options is %q, want DENY", got)
	}
	if got := testing.AllocsPerRun(100, func() { securityHeaders(next) }); got != 0 {
		t.Errorf("setting the security headers: %.0f allocations, want 0", got)
	}
}
