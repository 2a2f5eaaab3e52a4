package serve_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testcert"
	"github.com/dlockdev/dlock/serve"
)

// otherTok is a second client token: another client of the same server.
const otherTok = "other-token-0123456789abcdef"

// caller is one client of a server: its HTTP client (with its
// certificate, if any) and its bearer token (if any).
type caller struct {
	name string
	base string
	hc   *http.Client
	tok  string
	// forwarded is the X-Forwarded-For it sends (behind a trusted proxy).
	forwarded string
}

func (c caller) request(ctx context.Context, method, path, body string) *http.Request {
	req, _ := http.NewRequestWithContext(ctx, method, c.base+path, strings.NewReader(body))
	if c.tok != "" {
		req.Header.Set("Authorization", "Bearer "+c.tok)
	}
	if c.forwarded != "" {
		req.Header.Set("X-Forwarded-For", c.forwarded)
	}
	req.Header.Set("Content-Type", "application/json")
	return req
}

// do sends a request and returns the status and the body.
func (c caller) do(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	resp, err := c.hc.Do(c.request(context.Background(), method, path, body))
	if err != nil {
		t.Fatalf("%s: %s %s: %v", c.name, method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// acquire takes name and returns its lease.
func (c caller) acquire(t *testing.T, name string) lease {
	t.Helper()
	var ls lease
	code, body := c.do(t, "POST", "/v1/locks/"+name+"/acquire", `{"ttl_ms":30000,"wait_ms":0}`)
	if code != 200 || decodeJSON(body, &ls) != nil || ls.LeaseID == "" {
		t.Fatalf("%s: acquire %s: %d %s", c.name, name, code, body)
	}
	return ls
}

// events opens the lease's events stream; it returns the status, and,
// for 200, a function that reads the next event's name.
func (c caller) events(t *testing.T, id string) (int, func() string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	resp, err := c.hc.Do(c.request(ctx, "GET", "/v1/leases/"+id+"/events", ""))
	if err != nil {
		t.Fatalf("%s: events: %v", c.name, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		data, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 404 && !strings.Contains(string(data), "Unknown lease") {
			t.Errorf("%s: the events stream's 404 says %s, want the unknown lease's answer", c.name, data)
		}
		return resp.StatusCode, nil
	}
	br := bufio.NewReader(resp.Body)
	return 200, func() string {
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: events stream: %v", c.name, err)
			}
			if ev, ok := strings.CutPrefix(strings.TrimSpace(line), "event: "); ok {
				return ev
			}
		}
	}
}

// checkLeaseBound: owner's lease cannot be read, renewed, followed or
// released by any of strangers, who get the very answer an unknown lease
// gets; owner still can do all four; admin force-releases it by name.
func checkLeaseBound(t *testing.T, owner, admin caller, strangers ...caller) {
	t.Helper()
	ls := owner.acquire(t, "bound")
	id := ls.LeaseID
	for _, s := range strangers {
		_, unknown := s.do(t, "GET", "/v1/leases/00000000000000000000000000000000", "")
		for _, op := range []struct{ method, path, body string }{
			{"GET", "/v1/leases/" + id, ""},
			{"POST", "/v1/leases/" + id + "/renew", "{}"},
			{"POST", "/v1/leases/" + id + "/renew", `{"ttl_ms":10}`},
			{"DELETE", "/v1/leases/" + id, ""},
		} {
			if code, body := s.do(t, op.method, op.path, op.body); code != 404 || body != unknown {
				t.Errorf("%s: %s %s of another client's lease: %d %s, want 404 %s", s.name, op.method, op.path, code, body, unknown)
			}
		}
		if code, _ := s.events(t, id); code != 404 {
			t.Errorf("%s: the events stream of another client's lease: %d, want 404", s.name, code)
		}
	}
	var st lease
	if code, body := owner.do(t, "GET", "/v1/leases/"+id, ""); code != 200 || decodeJSON(body, &st) != nil || st.State != "held" || st.TTLms != 30000 {
		t.Fatalf("%s: its lease after the others' attempts: %d %s, want held with its 30 s TTL", owner.name, code, body)
	}
	if code, body := owner.do(t, "POST", "/v1/leases/"+id+"/renew", "{}"); code != 200 {
		t.Errorf("%s: renew of its own lease: %d %s", owner.name, code, body)
	}
	code, next := owner.events(t, id)
	if code != 200 {
		t.Fatalf("%s: events of its own lease: %d", owner.name, code)
	}
	if ev := next(); ev != "held" {
		t.Fatalf("%s: first event %q, want held", owner.name, ev)
	}
	if code, body := admin.do(t, "POST", "/v1/locks/bound/force-release", "{}"); code != 200 || !strings.Contains(body, `"fence":`) {
		t.Errorf("%s: force-release by name: %d %s", admin.name, code, body)
	}
	if ev := next(); ev != "lost" {
		t.Errorf("%s: after the admin's force-release the stream says %q, want lost", owner.name, ev)
	}
	again := owner.acquire(t, "bound")
	for _, s := range strangers {
		if code, _ := s.do(t, "DELETE", "/v1/leases/"+again.LeaseID, ""); code != 404 {
			t.Errorf("%s: release of another client's lease: %d, want 404", s.name, code)
		}
	}
	if code, body := owner.do(t, "DELETE", "/v1/leases/"+again.LeaseID, ""); code != 204 {
		t.Errorf("%s: release of its own lease: %d %s", owner.name, code, body)
	}
}

// TestLeaseBoundToItsToken: with two client tokens, the second client
// (and an admin, by lease id) gets 404 on the first's lease; the admin
// still force-releases it by name. The log says which clients, by the
// position of their tokens, never a token or a lease id.
func TestLeaseBoundToItsToken(t *testing.T) {
	e := newEnv(t, "mem://bound-token", func(c *serve.Config) { c.Tokens = append(c.Tokens, otherTok) })
	hc := http.DefaultClient
	a := caller{name: "client A", base: e.url, hc: hc, tok: clientTok}
	b := caller{name: "client B", base: e.url, hc: hc, tok: otherTok}
	admin := caller{name: "admin", base: e.url, hc: hc, tok: adminTok}
	checkLeaseBound(t, a, admin, b, admin)
	logs := e.logs.String()
	if !strings.Contains(logs, "client token 2") || !strings.Contains(logs, "client token 1") {
		t.Errorf("the log does not name the clients by their tokens' positions:\n%s", logs)
	}
}

// TestLeaseBoundToItsCertificate: with client certificates, a lease
// taken with one is not another certificate's.
func TestLeaseBoundToItsCertificate(t *testing.T) {
	ca := testcert.New(t, "dlock test CA", nil, true)
	pool := x509.NewCertPool()
	pool.AddCert(ca.X509)
	srv, err := serve.New(serve.Config{Locker: openLocker(t, "mem://bound-cert"), ClientCerts: true, AdminTokens: []string{adminTok}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewUnstartedServer(srv)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{testcert.New(t, "127.0.0.1", ca, false).TLS}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	defer ts.Close()
	client := func(cn string) *http.Client {
		cert := testcert.New(t, cn, ca, false).TLS
		tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}}}
		t.Cleanup(tr.CloseIdleConnections)
		return &http.Client{Transport: tr}
	}
	a := caller{name: "worker-7", base: ts.URL, hc: client("worker-7")}
	b := caller{name: "worker-8", base: ts.URL, hc: client("worker-8")}
	admin := caller{name: "admin", base: ts.URL, hc: client("operator"), tok: adminTok}
	checkLeaseBound(t, a, admin, b)
}

// TestNoAuthClientsAreOne: without authentication every client is one
// identity: a lease taken by one client address is another's to renew
// and release.
func TestNoAuthClientsAreOne(t *testing.T) {
	e := newEnv(t, "mem://bound-noauth", func(c *serve.Config) {
		c.Tokens, c.InsecureNoAuth = nil, true
		c.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}
	})
	a := caller{name: "10.0.0.1", base: e.url, hc: http.DefaultClient, forwarded: "10.0.0.1"}
	b := caller{name: "10.0.0.2", base: e.url, hc: http.DefaultClient, forwarded: "10.0.0.2"}
	ls := a.acquire(t, "shared")
	if code, body := b.do(t, "POST", "/v1/leases/"+ls.LeaseID+"/renew", "{}"); code != 200 {
		t.Errorf("renew from another address without authentication: %d %s, want 200", code, body)
	}
	if code, body := b.do(t, "DELETE", "/v1/leases/"+ls.LeaseID, ""); code != 204 {
		t.Errorf("release from another address without authentication: %d %s, want 204", code, body)
	}
}

func decodeJSON(s string, v any) error { return json.Unmarshal([]byte(s), v) }
