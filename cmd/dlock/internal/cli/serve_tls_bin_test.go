package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testcert"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// waitServing waits until get succeeds at base+"/healthz".
func waitServing(t *testing.T, get func(string) (*http.Response, error), base string, errb *syncBuffer) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("dlock serve did not answer: %v\n%s", err, errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestServeMutualTLS: dlock serve --tls-cert --tls-key --client-ca with no
// token: a client without a certificate, or with one from another CA, is
// refused in the handshake; one with a certificate from the CA is served.
func TestServeMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := testcert.New(t, "ca", nil, true)
	caFile, _ := ca.WritePEM(t, dir, "ca")
	srvCert, srvKey := testcert.New(t, "server", ca, false).WritePEM(t, dir, "server")
	clientCert := testcert.New(t, "worker-7", ca, false).TLS
	stranger := testcert.New(t, "stranger", testcert.New(t, "other-ca", nil, true), false).TLS
	pool := x509.NewCertPool()
	pool.AddCert(ca.X509)
	client := func(certs ...tls.Certificate) *http.Client {
		return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool, Certificates: certs}}}
	}

	addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	var out, errb syncBuffer
	cmd := startDlock(t, []string{"DLOCK_URL=" + fileURL(t)}, &out, &errb,
		"serve", "--listen", addr, "--tls-cert", srvCert, "--tls-key", srvKey, "--client-ca", caFile)
	base := "https://" + addr
	waitServing(t, client(clientCert).Get, base, &errb)

	if resp, err := client().Get(base + "/v1/locks"); err == nil {
		resp.Body.Close()
		t.Fatalf("a client without a certificate was served: %d", resp.StatusCode)
	}
	if resp, err := client(stranger).Get(base + "/v1/locks"); err == nil {
		resp.Body.Close()
		t.Fatalf("a certificate from another CA was served: %d", resp.StatusCode)
	}
	resp, err := client(clientCert).Post(base+"/v1/locks/tls-job/acquire", "application/json", strings.NewReader(`{"wait_ms":0}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a client with a CA-signed certificate: %d", resp.StatusCode)
	}
	if !strings.Contains(errb.String(), "https://"+addr) {
		t.Fatalf("stderr does not announce https://%s: %q", addr, errb.String())
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dlock serve after SIGTERM: %v\n%s", err, errb.String())
	}
}

// TestServeTokenFiles: a token file holds one token per line (blank lines
// and # comments skipped), every token works, $DLOCK_SERVE_TOKEN adds one,
// and only an admin token may force-release.
func TestServeTokenFiles(t *testing.T) {
	const (
		tokA   = "file-token-a-0123456789abcdef"
		tokB   = "file-token-b-0123456789abcdef"
		tokEnv = "env-token-0123456789abcdef"
		admin  = "admin-file-token-0123456789abcdef"
	)
	dir := t.TempDir()
	tokens, admins := filepath.Join(dir, "tokens.txt"), filepath.Join(dir, "admin.txt")
	if err := os.WriteFile(tokens, []byte("# clients\n"+tokA+"\n\n  "+tokB+"  \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(admins, []byte(admin+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	var out, errb syncBuffer
	cmd := startDlock(t, []string{"DLOCK_URL=" + fileURL(t), "DLOCK_SERVE_TOKEN=" + tokEnv}, &out, &errb,
		"serve", "--listen", addr, "--token-file", tokens, "--admin-token-file", admins)
	base := "http://" + addr
	waitServing(t, http.Get, base, &errb)
	call := func(method, path, tok string) int {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{}`))
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for tok, want := range map[string]int{tokA: 200, tokB: 200, tokEnv: 200, admin: 200, "": 401, "# clients": 401} {
		if code := call("GET", "/v1/locks", tok); code != want {
			t.Errorf("token %q: %d, want %d", tok, code, want)
		}
	}
	if code := call("POST", "/v1/locks/x/force-release", tokA); code != 403 {
		t.Errorf("force-release with a client token: %d, want 403", code)
	}
	if code := call("POST", "/v1/locks/x/force-release", admin); code != 200 {
		t.Errorf("force-release with the admin token: %d, want 200", code)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dlock serve after SIGTERM: %v\n%s", err, errb.String())
	}
	for _, tok := range []string{tokA, tokB, tokEnv, admin} {
		if strings.Contains(out.String()+errb.String(), tok) {
			t.Errorf("a token appeared in dlock serve's output")
		}
	}
}
