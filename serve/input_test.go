package serve_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dlockdev/dlock"
)

// TestJSONKeysMatchExactly: a key is matched as written: "TTL_MS" is an
// unknown field like any other, and a key given twice is refused, where
// encoding/json alone would take either silently.
func TestJSONKeysMatchExactly(t *testing.T) {
	e := newEnv(t, "mem://exact-keys", nil)
	for _, c := range []struct{ path, body, detail string }{
		{"/v1/locks/a/acquire", `{"TTL_MS":5000}`, `unknown field "TTL_MS"`},
		{"/v1/locks/a/acquire", `{"Owner":"x"}`, `unknown field "Owner"`},
		{"/v1/locks/a/acquire", `{"ttl_ms":5000,"ttl_ms":20}`, `"ttl_ms" given twice`},
		{"/v1/semaphores/s/acquire", `{"Permits":2}`, `unknown field "Permits"`},
		{"/v1/elections/e/campaign", `{"VALUE":"x"}`, `unknown field "VALUE"`},
		{"/v1/locks/a/force-release", `{"Election":true}`, `unknown field "Election"`},
		{"/v1/locks/a/acquire", `[]`, "a JSON object"},
		{"/v1/locks/a/acquire", `"x"`, "a JSON object"},
	} {
		tok := clientTok
		if strings.HasSuffix(c.path, "force-release") {
			tok = adminTok
		}
		var p problem
		if code, _ := e.call("POST", c.path, tok, c.body, &p); code != 400 || !strings.Contains(p.Detail, c.detail) {
			t.Errorf("POST %s %s: %d %q, want 400 naming %s", c.path, c.body, code, p.Detail, c.detail)
		}
	}
	// The exact keys still work, and so does an empty body.
	if code, _ := e.call("POST", "/v1/locks/exact/acquire", clientTok, `{"ttl_ms":5000,"wait_ms":0,"owner":"exact"}`, nil); code != 200 {
		t.Errorf("exact keys: %d, want 200", code)
	}
	if code, _ := e.call("POST", "/v1/locks/empty/acquire", clientTok, ``, nil); code != 200 {
		t.Errorf("empty body: %d, want 200", code)
	}
}

// TestEchoedValuesAreTruncated: a 400 about a 60 KB owner, value or key
// names it by its first 64 runes and "…", not in full.
func TestEchoedValuesAreTruncated(t *testing.T) {
	e := newEnv(t, "mem://echo", nil)
	huge := strings.Repeat("o", 60000)
	for _, c := range []struct{ path, body, field string }{
		{"/v1/locks/a/acquire", `{"owner":"` + huge + `"}`, "owner"},
		{"/v1/semaphores/s/acquire", `{"permits":2,"owner":"` + huge + `"}`, "owner"},
		{"/v1/elections/e/campaign", `{"value":"` + huge + `","wait_ms":0}`, "value"},
		{"/v1/locks/a/acquire", `{"` + huge + `":1}`, "unknown field"},
	} {
		var p problem
		code, _ := e.call("POST", c.path, clientTok, c.body, &p)
		if code != 400 || utf8.RuneCountInString(p.Detail) > 300 || !strings.Contains(p.Detail, strings.Repeat("o", 64)+`"…`) || !strings.Contains(p.Detail, c.field) {
			t.Errorf("POST %s with a 60 KB %s: %d, detail of %d runes %.200q…; want 400 echoing 64 runes and …", c.path, c.field, code, utf8.RuneCountInString(p.Detail), p.Detail)
		}
	}
}

// TestCampaignValueIsCalledValue: an election's published value is
// "value" in the campaign's errors and answers, as in its request.
func TestCampaignValueIsCalledValue(t *testing.T) {
	e := newEnv(t, "mem://campaign-value", nil)
	var p problem
	code, _ := e.call("POST", "/v1/elections/sched/campaign", clientTok, `{"value":"bad\u0001value","wait_ms":0}`, &p)
	if code != 400 || !strings.Contains(p.Detail, `value "bad\x01value"`) || strings.Contains(p.Detail, "owner") {
		t.Errorf("campaign with a control character in value: %d %q, want 400 naming value, not owner", code, p.Detail)
	}
	var term map[string]any
	if code, _ := e.call("POST", "/v1/elections/sched/campaign", clientTok, `{"value":"10.0.0.7:8080","wait_ms":0}`, &term); code != 200 || term["value"] != "10.0.0.7:8080" {
		t.Errorf("campaign: %d %v, want 200 with value 10.0.0.7:8080", code, term)
	}
	var leader map[string]any
	if code, _ := e.call("GET", "/v1/elections/sched/leader", clientTok, nil, &leader); code != 200 || leader["value"] != "10.0.0.7:8080" {
		t.Errorf("leader: %d %v, want 200 with value 10.0.0.7:8080", code, leader)
	}
}

// TestLibraryVerdictOnNamesPassesThrough: names and owners with bidi
// controls, control characters or invalid UTF-8 get the library's
// verdict: what it refuses is a 400 with its wording (the value
// escaped), what it takes is served.
func TestLibraryVerdictOnNamesPassesThrough(t *testing.T) {
	e := newEnv(t, "mem://verdicts", nil)
	for _, s := range []string{"rev\u202egnp.exe", "iso\u2066late\u2069", "mark\u200fed", "tab\tbed", "nul\x00l", "bad\xffutf8"} {
		_, libErr := e.locker.Acquire(context.Background(), "lib-"+s, dlock.WithWait(0))
		_, ownerErr := e.locker.Acquire(context.Background(), "lib-owner", dlock.WithOwner(s), dlock.WithWait(0))
		for _, c := range []struct {
			what, path, body string
			lib              error
		}{
			{"name", "/v1/locks/" + pathEscape("srv-"+s) + "/acquire", `{"wait_ms":0}`, libErr},
			{"owner", "/v1/locks/srv-owner/acquire", `{"wait_ms":0,"owner":` + jsonString(s) + `}`, ownerErr},
		} {
			if c.what == "owner" && !utf8.ValidString(s) {
				continue // JSON carries only valid UTF-8 (encoding/json sends U+FFFD)
			}
			var got map[string]any
			code, _ := e.call("POST", c.path, clientTok, c.body, &got)
			detail, _ := got["detail"].(string)
			switch {
			case errors.Is(c.lib, dlock.ErrInvalidArgument) && (code != 400 || !strings.Contains(detail, "invalid argument")):
				t.Errorf("%s %q: the library refuses it (%v), the server answered %d %q", c.what, s, c.lib, code, detail)
			case c.lib == nil && code != 200:
				t.Errorf("%s %q: the library takes it, the server answered %d %q", c.what, s, code, detail)
			case strings.ContainsAny(detail, "\u202e\u2066\u2069\u200f\x00"):
				t.Errorf("%s %q: the detail %q carries the raw control character", c.what, s, detail)
			}
			if id, ok := got["lease_id"].(string); ok {
				e.call("DELETE", "/v1/leases/"+id, clientTok, nil, nil)
			}
		}
		releaseAll(e)
	}
}

// TestBlankNamesRefused: a name that is empty or only whitespace is
// refused on every route that takes one, with a 400 quoting it, where a
// lock named " " was granted and shown as nothing on the dashboard.
func TestBlankNamesRefused(t *testing.T) {
	e := newEnv(t, "mem://blank-names", nil)
	for _, name := range []string{" ", "%20%20", "%E2%80%83", "%C2%A0"} {
		for _, c := range []struct{ method, path, body string }{
			{"POST", "/v1/locks/" + name + "/acquire", `{"wait_ms":0}`},
			{"POST", "/v1/semaphores/" + name + "/acquire", `{"permits":2,"wait_ms":0}`},
			{"POST", "/v1/elections/" + name + "/campaign", `{"value":"v","wait_ms":0}`},
			{"GET", "/v1/elections/" + name + "/leader", ``},
			{"GET", "/v1/locks/" + name, ``},
			{"POST", "/v1/locks/" + name + "/force-release", `{}`},
		} {
			var p problem
			code, _ := e.call(c.method, strings.Replace(c.path, " ", "%20", 1), adminTok, c.body, &p)
			if code != 400 || !strings.Contains(p.Detail, "only whitespace") || !strings.Contains(p.Detail, `"`) {
				t.Errorf("%s %s: %d %q, want 400 saying the quoted name is only whitespace", c.method, c.path, code, p.Detail)
			}
		}
	}
	if hs, _ := e.locker.List(context.Background(), ""); len(hs) != 0 {
		t.Errorf("blank names were granted: %v", hs)
	}
}
