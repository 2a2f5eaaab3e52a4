package serve_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestUncleanPathsAreRefused: a path with an empty segment, "." or ".."
// where a lock name or lease id goes (POST /v1/locks//acquire, a client
// that built its URL from an empty variable) is answered 400 with a
// problem naming the empty or dotted name. The ServeMux alone would
// redirect it to a cleaned path: a POST to another endpoint, or a GET
// of the list in place of one lock.
func TestUncleanPathsAreRefused(t *testing.T) {
	e := newEnv(t, "mem://unclean-paths", nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	checked := 0
	for _, route := range e.srv.Routes() {
		method, pattern, _ := strings.Cut(route, " ")
		param := ""
		for _, p := range []string{"{name}", "{id}"} {
			if strings.Contains(pattern, p) {
				param = p
			}
		}
		if param == "" {
			continue
		}
		for _, v := range []struct{ value, mention string }{
			{"", "empty"}, {".", `"."`}, {"..", `".."`}, {"a/../b", `".."`}, {"a/./b", `"."`}, {"a//b", "empty"},
		} {
			path := strings.Replace(pattern, param, v.value, 1)
			req, _ := http.NewRequest(method, e.url+path, strings.NewReader(`{}`))
			req.Header.Set("Authorization", "Bearer "+adminTok)
			req.Header.Set("Content-Type", "application/json")
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var p problem
			_ = json.Unmarshal(body, &p)
			checked++
			what := "lock name"
			if param == "{id}" {
				what = "lease id"
			} else if strings.HasPrefix(pattern, "/v1/elections/") {
				what = "election name"
			} else if strings.HasPrefix(pattern, "/v1/semaphores/") {
				what = "semaphore name"
			}
			if resp.StatusCode != 400 || resp.Header.Get("Content-Type") != "application/problem+json" || resp.Header.Get("Location") != "" ||
				!strings.Contains(p.Detail, v.mention) || (!strings.Contains(v.value, "/") && !strings.Contains(p.Detail, what)) {
				t.Errorf("%s %s: %d %s (Location %q) %q; want 400 application/problem+json naming the %s (%s)",
					method, path, resp.StatusCode, resp.Header.Get("Content-Type"), resp.Header.Get("Location"), body, what, v.mention)
			}
		}
	}
	// A name "." sent percent-encoded is a name like any other.
	var ls lease
	if code, _ := e.call("POST", "/v1/locks/%2E/acquire", clientTok, `{}`, &ls); code != 200 || ls.Name != "." {
		t.Errorf("POST /v1/locks/%%2E/acquire: %d, name %q; want 200 for the lock \".\"", code, ls.Name)
	}
	if checked < 6*9 {
		t.Errorf("checked %d requests: the routes with a name or id are fewer than expected", checked)
	}
}
