package servebench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"
)

// api calls the server's HTTP API as a client (token) or an admin: the
// requests on wire, the events streams on an http.Client.
type api struct {
	base         string
	token, admin string
	wire         *wire
}

// lease is the part of the API's Lease object the benchmark reads.
type lease struct {
	ID    string `json:"lease_id"`
	Name  string `json:"name"`
	Fence uint64 `json:"fence"`
}

// acquireBody is the body of POST /v1/locks/{name}/acquire.
type acquireBody struct {
	TTL   int64  `json:"ttl_ms"`
	Wait  int64  `json:"wait_ms"`
	Owner string `json:"owner"`
}

// acquire takes name through the API, waiting up to wait (0: one try).
func (a *api) acquire(ctx context.Context, name string, ttl, wait time.Duration, owner string) (lease, error) {
	body, _ := json.Marshal(acquireBody{TTL: ttl.Milliseconds(), Wait: wait.Milliseconds(), Owner: owner})
	var ls lease
	err := a.do(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(name)+"/acquire", a.token, body, http.StatusOK, &ls)
	if err == nil && ls.ID == "" {
		err = fmt.Errorf("servebench: acquire %q: the answer has no lease_id", name)
	}
	return ls, err
}

// release gives a lease back: DELETE /v1/leases/{id}.
func (a *api) release(ctx context.Context, id string) error {
	return a.do(ctx, http.MethodDelete, "/v1/leases/"+url.PathEscape(id), a.token, nil, http.StatusNoContent, nil)
}

// forceRelease evicts name's holder with the admin token.
func (a *api) forceRelease(ctx context.Context, name string) error {
	return a.do(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(name)+"/force-release", a.admin, []byte("{}"), http.StatusOK, nil)
}

// events opens a lease's events stream on hc.
func (a *api) events(ctx context.Context, hc *http.Client, id string) (*http.Response, error) {
	req, err := a.request(ctx, http.MethodGet, "/v1/leases/"+url.PathEscape(id)+"/events", a.token, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, problem(req, resp)
	}
	return resp, nil
}

// do sends one request and decodes the answer into out (when non-nil);
// any status but want is an error carrying the problem's detail.
func (a *api) do(ctx context.Context, method, path, token string, body []byte, want int, out any) error {
	code, data, err := a.wire.do(ctx, method, path, token, body)
	if err != nil {
		return fmt.Errorf("servebench: %s %s: %w", method, path, err)
	}
	if code != want {
		return problemError(method, path, code, data)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("servebench: %s %s: decode the answer: %w", method, path, err)
		}
	}
	return nil
}

// request builds an API request with the bearer token.
func (a *api) request(ctx context.Context, method, path, token string, body []byte) (*http.Request, error) {
	return NewRequest(ctx, method, a.base+path, token, body)
}

// NewRequest builds a request to the dlock serve API at url with the
// bearer token, and a JSON body when body is not nil.
func NewRequest(ctx context.Context, method, url, token string, body []byte) (*http.Request, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

// problemDoc is the part of an application/problem+json answer an error
// message shows.
type problemDoc struct {
	Title  string `json:"title"`
	Detail string `json:"detail"`
}

// problem is the error for an unexpected answer: its status and the
// problem's title and detail (never the request's headers).
func problem(req *http.Request, resp *http.Response) error {
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	return problemError(req.Method, req.URL.Path, resp.StatusCode, raw)
}

// problemError is the error for an unexpected status and its body.
func problemError(method, path string, code int, raw []byte) error {
	var p problemDoc
	if json.Unmarshal(raw, &p) != nil || (p.Title == "" && p.Detail == "") {
		p.Detail = string(bytes.TrimSpace(raw))
	}
	return fmt.Errorf("servebench: %s %s: %d %s: %s: %s", method, path, code, http.StatusText(code), p.Title, p.Detail)
}
