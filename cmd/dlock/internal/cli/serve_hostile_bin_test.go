package cli

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// slowClient is one connection that sends a request's headers announcing
// a 100,000-byte body, then one byte of it every 3 s (the body would take
// 83 hours), and reconnects when the server closes it, until stopped.
type slowClient struct {
	from, addr, token string
	slowHead          bool          // trickle the headers instead of the body
	open              *atomic.Int64 // connections of this kind now open
}

// run connects again and again until stop; after stop it keeps its last
// connection until the server closes it or done.
func (c *slowClient) run(stop, done <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		default:
		}
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(c.from)}, Timeout: 5 * time.Second}
		conn, err := d.Dial("tcp", c.addr)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c.hold(conn, stop, done)
		time.Sleep(100 * time.Millisecond)
	}
}

// hold trickles the body until the server closes the connection.
func (c *slowClient) hold(conn net.Conn, stop, done <-chan struct{}) {
	c.open.Add(1)
	defer c.open.Add(-1)
	defer conn.Close()
	auth := ""
	if c.token != "" {
		auth = "Authorization: Bearer " + c.token + "\r\n"
	}
	head := fmt.Sprintf("POST /v1/locks/victim/acquire HTTP/1.1\r\nHost: %s\r\n%sContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{", c.addr, auth)
	if c.slowHead {
		head = "POST /v1/locks/victim/acquire HTTP/1.1\r\nX-Slow: "
	}
	if _, err := io.WriteString(conn, head); err != nil {
		return
	}
	closed := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, conn) // returns when the server closes
		close(closed)
	}()
	tick := time.NewTicker(3 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			return
		case <-stop:
			select { // held until the server lets go, to count it
			case <-closed:
			case <-done:
			}
			return
		case <-tick.C:
			_, _ = conn.Write([]byte(" "))
		}
	}
}

// openFDs counts a process's open descriptors.
func openFDs(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// TestServeSurvivesSlowBodies: dlock serve under a 400-descriptor limit,
// 500 clients without a token sending a request body at one byte per 3 s
// from 127.0.0.2 (reconnecting whenever the server closes them), 50 with
// a valid token doing the same from 127.0.0.3, and 500 sending their
// headers at that pace from 127.0.0.4: a legitimate acquire from
// 127.0.0.1 is still answered, and after the server's bound on reading a
// body no slow connection is held any more.
func TestServeSurvivesSlowBodies(t *testing.T) {
	testserver.Binary(t, "prlimit")
	const tok = "slow-bodies-test-token-0123456789"
	const bodyBound = 10 * time.Second // serve.DefaultBodyReadTimeout
	port := testserver.FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var out, errb syncBuffer
	cmd := exec.Command("prlimit", "--nofile=400:400", dlockBin, "serve", "--listen", addr)
	cmd.Env = append(withoutEnv(os.Environ(), "DLOCK_URL"), "DLOCK_URL="+fileURL(t), "DLOCK_SERVE_TOKEN="+tok)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	base := "http://" + addr
	waitServing(t, http.Get, base, &errb)
	baseFDs := openFDs(cmd.Process.Pid)

	stop, done := make(chan struct{}), make(chan struct{})
	var anon, authed, heads atomic.Int64
	var clients []*slowClient
	for range 500 {
		clients = append(clients, &slowClient{from: "127.0.0.2", addr: addr, open: &anon},
			&slowClient{from: "127.0.0.4", addr: addr, slowHead: true, open: &heads})
	}
	for range 50 {
		clients = append(clients, &slowClient{from: "127.0.0.3", addr: addr, token: tok, open: &authed})
	}
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(func() { c.run(stop, done) })
	}
	stopOnce := sync.OnceFunc(func() { close(stop) })
	defer func() {
		stopOnce()
		close(done)
		wg.Wait()
	}()
	time.Sleep(3 * time.Second) // every slow client has connected at least once
	t.Logf("with the slow clients connected: %d slow bodies without a token, %d with, %d slow headers open (client side); the server holds %d descriptors (%d before)",
		anon.Load(), authed.Load(), heads.Load(), openFDs(cmd.Process.Pid), baseFDs)

	start := time.Now()
	hc := &http.Client{Timeout: 60 * time.Second}
	req, _ := http.NewRequest("POST", base+"/v1/locks/legit/acquire", strings.NewReader(`{"wait_ms":0,"ttl_ms":60000}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("a legitimate acquire with 1,050 slow clients: %v after %s\nserver stderr:\n%.3000s", err, took.Round(time.Millisecond), errb.String())
	}
	resp.Body.Close()
	// 60 s is far inside the 83 hours a slow body takes: an answer at all
	// means the slow clients did not starve it.
	if resp.StatusCode != 200 {
		t.Fatalf("a legitimate acquire with 1,050 slow clients: %d after %s", resp.StatusCode, took)
	}
	t.Logf("a legitimate acquire with 1,050 slow clients answered 200 in %s", took.Round(time.Microsecond))

	stopOnce() // no more reconnects; each client waits for the server to close it
	time.Sleep(bodyBound + 5*time.Second)
	held := anon.Load() + authed.Load() + heads.Load()
	t.Logf("%s after the reconnects stopped: %d slow connections still held (%d bodies without a token, %d with, %d headers); the server holds %d descriptors",
		bodyBound+5*time.Second, held, anon.Load(), authed.Load(), heads.Load(), openFDs(cmd.Process.Pid))
	if held != 0 {
		t.Errorf("%d slow connections still held %s after the last was opened, past the server's %s bounds on reading headers and a body", held, bodyBound+5*time.Second, bodyBound)
	}
}

// TestServeRefusesBadLimits: a --trusted-proxy that is no address or
// prefix, or a connection bound below 1, is a usage error naming it.
func TestServeRefusesBadLimits(t *testing.T) {
	env := []string{"DLOCK_URL=" + fileURL(t), "DLOCK_SERVE_TOKEN=limits-test-token-0123456789"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--trusted-proxy", "10.0.0.0/33"}, `"10.0.0.0/33"`},
		{[]string{"serve", "--trusted-proxy", "lb.internal"}, `"lb.internal"`},
		{[]string{"serve", "--max-conns-per-client", "0"}, "--max-conns-per-client 0"},
	} {
		r := runBin(t, env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("dlock %s: exit %d %q, want 2 naming %s", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
}

// TestServeRefusesBadLeaseKeys: a lease key file that is missing, empty
// or holds a short key is a usage error naming the file and the line,
// never the key; a backend that cannot adopt a lease refuses replicas.
func TestServeRefusesBadLeaseKeys(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	short := write("short.txt", "# rotated in on Monday\n"+strings.Repeat("k", 64)+"\nsecret-but-short\n")
	empty := write("empty.txt", "# nothing yet\n\n")
	env := []string{"DLOCK_URL=" + fileURL(t), "DLOCK_SERVE_TOKEN=lease-keys-test-token-0123456789"}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--lease-key-file", short}, short + ": line 3 holds a key of 16 characters"},
		{[]string{"serve", "--lease-key-file", empty}, empty + " holds no key"},
		{[]string{"serve", "--lease-key-file", filepath.Join(dir, "absent.txt")}, "absent.txt"},
	} {
		r := runBin(t, env, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) || strings.Contains(r.stderr, "secret-but-short") {
			t.Errorf("dlock %s: exit %d %q, want 2 naming %q and not the key", strings.Join(c.args, " "), r.code, r.stderr, c.want)
		}
	}
	keys := write("keys.txt", strings.Repeat("k", 64)+"\n")
	pg := []string{"DLOCK_URL=" + testserver.Postgres(t).URL() + "&mode=advisory", "DLOCK_SERVE_TOKEN=lease-keys-test-token-0123456789"}
	r := runBin(t, pg, "serve", "--listen", "127.0.0.1:0", "--lease-key-file", keys)
	if r.code != 2 || !strings.Contains(r.stderr, "replicas") || !strings.Contains(r.stderr, "connection") {
		t.Errorf("dlock serve --lease-key-file on Postgres advisory mode: exit %d %q, want 2 saying why it cannot run as replicas", r.code, r.stderr)
	}
}
