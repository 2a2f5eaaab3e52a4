package failover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/dlockdev/dlock/cmd/dlock/internal/servebench"
)

// callTimeout bounds one API call that is not a stream: far above any
// answer of a live replica, so that it only ends a hung call.
const callTimeout = 30 * time.Second

// endpoint is one replica's HTTP API, as one client (a bearer token) sees it.
type endpoint struct {
	base  string // http://127.0.0.1:PORT
	token string
	hc    *http.Client
}

// lease is the part of the API's Lease object the harness reads.
type lease struct {
	ID    string `json:"lease_id"`
	Name  string `json:"name"`
	Fence uint64 `json:"fence"`
	State string `json:"state"`
}

// callError is an API call that did not get its expected answer: either
// the replica could not be reached (Status 0), or it answered Status.
type callError struct {
	Op     string // "POST /v1/locks/{name}/acquire", without ids
	Status int
	Type   string // the problem's type, e.g. "https://dlock.dev/problems/lost"
	Err    error  // the transport error when Status is 0
}

func (e *callError) Error() string {
	if e.Status == 0 {
		return fmt.Sprintf("failover: %s: unreachable: %v", e.Op, e.Err)
	}
	return fmt.Sprintf("failover: %s: %d %s", e.Op, e.Status, e.Type)
}

func (e *callError) Unwrap() error { return e.Err }

// statusOf is the HTTP status of a failed call: 0 when the replica could
// not be reached, -1 when err is not a call's error (ctx ended early).
func statusOf(err error) int {
	var ce *callError
	if errors.As(err, &ce) {
		return ce.Status
	}
	return -1
}

// acquireBody is the body of POST /v1/locks/{name}/acquire.
type acquireBody struct {
	TTL   int64  `json:"ttl_ms"`
	Wait  int64  `json:"wait_ms"`
	Owner string `json:"owner"`
}

// acquire takes name for ttl, waiting up to wait.
func (e *endpoint) acquire(ctx context.Context, name string, ttl, wait time.Duration, owner string) (lease, error) {
	body, _ := json.Marshal(acquireBody{TTL: ttl.Milliseconds(), Wait: wait.Milliseconds(), Owner: owner})
	var ls lease
	err := e.call(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(name)+"/acquire", "/v1/locks/{name}/acquire",
		e.token, body, http.StatusOK, &ls)
	return ls, err
}

// renew is POST /v1/leases/{id}/renew.
func (e *endpoint) renew(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodPost, "/v1/leases/"+url.PathEscape(id)+"/renew", "/v1/leases/{id}/renew",
		e.token, []byte("{}"), http.StatusOK, nil)
}

// release is DELETE /v1/leases/{id}.
func (e *endpoint) release(ctx context.Context, id string) error {
	return e.call(ctx, http.MethodDelete, "/v1/leases/"+url.PathEscape(id), "/v1/leases/{id}",
		e.token, nil, http.StatusNoContent, nil)
}

// get is GET /v1/leases/{id}: the lease with its state.
func (e *endpoint) get(ctx context.Context, id string) (lease, error) {
	var ls lease
	err := e.call(ctx, http.MethodGet, "/v1/leases/"+url.PathEscape(id), "/v1/leases/{id}",
		e.token, nil, http.StatusOK, &ls)
	return ls, err
}

// forceRelease evicts name's holder; e's token must be an admin's.
func (e *endpoint) forceRelease(ctx context.Context, name string) error {
	return e.call(ctx, http.MethodPost, "/v1/locks/"+url.PathEscape(name)+"/force-release",
		"/v1/locks/{name}/force-release", e.token, []byte("{}"), http.StatusOK, nil)
}

// events opens a lease's events stream; the caller closes the body.
func (e *endpoint) events(ctx context.Context, id string) (io.ReadCloser, error) {
	const op = "GET /v1/leases/{id}/events"
	req, err := e.request(ctx, http.MethodGet, "/v1/leases/"+url.PathEscape(id)+"/events", e.token, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := e.hc.Do(req)
	if err != nil {
		return nil, transportError(ctx, op, err)
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		return nil, answerError(op, resp)
	}
	return resp.Body, nil
}

// call sends one request within callTimeout and decodes the answer into
// out (when non-nil); any status but want is a *callError.
func (e *endpoint) call(ctx context.Context, method, path, route, token string, body []byte, want int, out any) error {
	op := method + " " + route
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := e.request(cctx, method, path, token, body)
	if err != nil {
		return err
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return transportError(ctx, op, err) // a hung replica (callTimeout) counts as unreachable
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		return answerError(op, resp)
	}
	if out != nil {
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			return fmt.Errorf("failover: %s: decode the answer: %w", op, err)
		}
	}
	_, _ = io.Copy(io.Discard, resp.Body) // keep the connection reusable
	return nil
}

// request builds an API request with the bearer token.
func (e *endpoint) request(ctx context.Context, method, path, token string, body []byte) (*http.Request, error) {
	return servebench.NewRequest(ctx, method, e.base+path, token, body)
}

// transportError is a call that got no answer: unreachable (Status 0),
// unless the caller's own ctx ended it, which is returned as such.
func transportError(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("failover: %s: %w", op, ctx.Err())
	}
	return &callError{Op: op, Err: err}
}

// answerError is the error for an unexpected answer: its status and the
// problem's type (never the request's headers, which carry the token).
func answerError(op string, resp *http.Response) error {
	var p struct {
		Type string `json:"type"`
	}
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	_ = json.Unmarshal(raw, &p)
	return &callError{Op: op, Status: resp.StatusCode, Type: p.Type}
}
