package dlockotel

import (
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// redisURL starts a redis-server on a free loopback port for the test and
// returns its URL. Without the binary the test is skipped, or fails when
// DLOCK_TEST_REQUIRE_SERVERS=1 (CI). (The root module's
// internal/testing/testserver cannot be imported from this module.)
func redisURL(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("DLOCK_TEST_REQUIRE_SERVERS") == "1" {
			t.Fatalf("redis-server not found and DLOCK_TEST_REQUIRE_SERVERS=1: %v", err)
		}
		t.Skipf("redis-server not found: %v", err)
	}
	for range 20 {
		// Below the kernel's ephemeral range, so that no client socket
		// takes the port between the probe and the server's bind.
		port := strconv.Itoa(20000 + rand.IntN(12768))
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			continue
		}
		ln.Close()
		cmd := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "yes", "--dir", t.TempDir())
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if c, err := net.Dial("tcp", "127.0.0.1:"+port); err == nil {
				c.Close()
				return "redis://127.0.0.1:" + port
			}
		}
		t.Fatalf("redis-server on port %s did not listen within 10s", port)
	}
	t.Fatal("no free port for redis-server after 20 tries")
	return ""
}
