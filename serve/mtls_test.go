package serve_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testcert"
	"github.com/dlockdev/dlock/serve"
)

// TestMutualTLS: with client certificates required, a client without one
// is refused in the handshake, and one with a certificate from the CA is
// served without a token.
func TestMutualTLS(t *testing.T) {
	ca := testcert.New(t, "dlock test CA", nil, true)
	serverCert := testcert.New(t, "127.0.0.1", ca, false).TLS
	clientCert := testcert.New(t, "worker-7", ca, false).TLS
	pool := x509.NewCertPool()
	pool.AddCert(ca.X509)

	srv, err := serve.New(serve.Config{Locker: openLocker(t, "mem://mtls"), Tokens: []string{clientTok}})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	ts := httptest.NewUnstartedServer(srv)
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{serverCert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert}
	ts.StartTLS()
	defer ts.Close()

	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}
	if resp, err := client().Get(ts.URL + "/v1/locks"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate was served: %d", resp.StatusCode)
	}
	resp, err := client(clientCert).Get(ts.URL + "/v1/locks")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a client with a CA-signed certificate: %d", resp.StatusCode)
	}
	// A certificate from another CA fails the handshake.
	stranger := testcert.New(t, "stranger", testcert.New(t, "other CA", nil, true), false).TLS
	if resp, err := client(stranger).Get(ts.URL + "/v1/locks"); err == nil {
		resp.Body.Close()
		t.Fatal("a certificate from another CA was served")
	}
}

// TestLoginCookie: the sign-in form's token becomes a cookie that
// authenticates API calls; a wrong token gets the form again with 401.
func TestLoginCookie(t *testing.T) {
	e := newEnv(t, "mem://login", nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(e.url+"/login", map[string][]string{"token": {"not-the-token-xxxxxxxx"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 || len(resp.Cookies()) != 0 {
		t.Fatalf("wrong token: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	resp, err = noRedirect.PostForm(e.url+"/login", map[string][]string{"token": {clientTok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	cs := resp.Cookies()
	if resp.StatusCode != 303 || len(cs) != 1 || cs[0].Name != "dlock_session" || !cs[0].HttpOnly || cs[0].SameSite != http.SameSiteStrictMode || strings.Contains(cs[0].Value, clientTok) {
		t.Fatalf("login: %d, cookies %+v", resp.StatusCode, cs)
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/dashboard", nil)
	req.AddCookie(cs[0])
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("API call with the cookie: %d", resp.StatusCode)
	}
}

// TestLogoutEndsTheSession: after POST /logout the cookie no longer
// authenticates.
func TestLogoutEndsTheSession(t *testing.T) {
	e := newEnv(t, "mem://logout", nil)
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.PostForm(e.url+"/login", map[string][]string{"token": {clientTok}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	c := resp.Cookies()[0]
	req, _ := http.NewRequest("POST", e.url+"/logout", nil)
	req.AddCookie(c)
	if resp, err = noRedirect.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	req, _ = http.NewRequest("GET", e.url+"/v1/dashboard", nil)
	req.AddCookie(c)
	if resp, err = http.DefaultClient.Do(req); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("the cookie still works after logout: %d", resp.StatusCode)
	}
}
