package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestServeRefusesUnsafeStarts: no authentication, or --insecure-no-auth
// on a non-loopback address, is a usage error naming the fix.
func TestServeRefusesUnsafeStarts(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t)}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve"}, "no authentication"},
		{[]string{"serve", "--insecure-no-auth", "--listen", "0.0.0.0:0"}, `"0.0.0.0:0"`},
		{[]string{"serve", "--tls-cert", "x.pem"}, "--tls-key"},
		{[]string{"serve", "--listen", "nope"}, `"nope"`},
		{[]string{"serve", "--token-file", "/nonexistent/tokens"}, "/nonexistent/tokens"},
	} {
		r := runBin(t, env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("dlock %s: exit %d %q, want 2 naming %s", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}

// TestServeTakesAndReleasesLeases: dlock serve on a file backend hands a
// lease to an HTTP client, exposes metrics, and on SIGTERM releases the
// lease (a second server on the same file can then take it at once).
func TestServeTakesAndReleasesLeases(t *testing.T) {
	const tok = "serve-bin-test-token-0123456789"
	url := fileURL(t)
	addr := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	env := []string{"DLOCK_URL=" + url, "DLOCK_SERVE_TOKEN=" + tok}
	var out, errb syncBuffer
	cmd := startDlock(t, env, &out, &errb, "serve", "--listen", addr)
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("dlock serve did not answer: %v\n%s", err, errb.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	call := func(method, path string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(`{"wait_ms":0,"ttl_ms":60000}`))
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := call("POST", "/v1/locks/nightly/acquire")
	var ls struct {
		Fence uint64 `json:"fence"`
	}
	if code != 200 || json.Unmarshal([]byte(body), &ls) != nil || ls.Fence == 0 {
		t.Fatalf("acquire: %d %s", code, body)
	}
	if code, body := call("GET", "/metrics"); code != 200 || !strings.Contains(body, `dlock_held{backend="file"} 1`) {
		t.Fatalf("metrics: %d, want dlock_held 1 in:\n%.2000s", code, body)
	}
	if code, body := call("GET", "/"); code != 200 || !strings.Contains(body, "<html") {
		t.Fatalf("dashboard: %d %.200s", code, body)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("dlock serve after SIGTERM: %v\n%s", err, errb.String())
	}
	if !strings.Contains(errb.String(), "leases released") || strings.Contains(errb.String()+out.String(), tok) {
		t.Fatalf("stderr: %q", errb.String())
	}
	r := runBin(t, []string{"DLOCK_URL=" + url}, "ls", "--json")
	if strings.Contains(r.stdout, "nightly") {
		t.Fatalf("the lease outlived the server: %s", r.stdout)
	}
}

// TestBenchServe: dlock bench --serve runs the HTTP and library sides and
// the events streams, and prints the ratio and every stream's event.
func TestBenchServe(t *testing.T) {
	r := runBin(t, []string{"DLOCK_URL=" + fileURL(t)}, "bench", "--serve", "--duration", "200ms", "--streams", "20")
	if r.code != 0 || !strings.Contains(r.stdout, "the library's cycles/s") || !strings.Contains(r.stdout, "lost events by reason") {
		t.Fatalf("exit %d\n%s\n%s", r.code, r.stdout, r.stderr)
	}
	if r := runBin(t, []string{"DLOCK_URL=" + fileURL(t)}, "bench", "--serve", "--streams", "-5"); r.code != 2 || !strings.Contains(r.stderr, "-5") {
		t.Fatalf("--streams -5: exit %d %s", r.code, r.stderr)
	}
}
