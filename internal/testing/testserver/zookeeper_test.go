package testserver_test

import (
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestZooKeeper: a standalone server serves, stops, and serves again on
// the same address after Start.
func TestZooKeeper(t *testing.T) {
	s := testserver.ZooKeeper(t)
	if mode, err := s.Mode(); err != nil || mode != "standalone" {
		t.Fatalf("Mode = %q, %v; want standalone", mode, err)
	}
	s.Stop()
	if _, err := s.Mode(); err == nil {
		t.Fatal("a stopped server still answers")
	}
	s.Start()
	if err := s.WaitServing(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}
