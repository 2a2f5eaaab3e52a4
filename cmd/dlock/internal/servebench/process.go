package servebench

import (
	"bytes"
	"runtime"
)

// Stack fragments that place a goroutine on the client side of the run
// (its HTTP connections and stream readers) or on the server side (HTTP
// server connections, package serve, the library keeping the leases, the
// backend's client).
var (
	clientFrames = []string{"net/http.(*persistConn)", "dlock/internal/servebench.", "dlock/internal/benchwork."}
	serverFrames = []string{
		"net/http.(*conn)", "net/http.(*connReader)", "net/http.(*Server)",
		"github.com/dlockdev/dlock", "github.com/redis/", "github.com/jackc/", "go.etcd.io/", "github.com/go-zookeeper/",
	}
)

// sample collects garbage, then counts the goroutines and the heap in use.
func sample() Process {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	p := Process{HeapInuse: ms.HeapInuse}
	for _, g := range bytes.Split(allStacks(), []byte("\n\n")) {
		if len(bytes.TrimSpace(g)) == 0 {
			continue
		}
		p.Goroutines++
		switch {
		case containsAny(g, clientFrames):
			p.Client++
		case containsAny(g, serverFrames):
			p.Server++
		}
	}
	return p
}

// allStacks is runtime.Stack of every goroutine, in a buffer big enough.
func allStacks() []byte {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return buf[:n]
		}
		buf = make([]byte, 2*len(buf))
	}
}

// containsAny reports whether s contains one of subs.
func containsAny(s []byte, subs []string) bool {
	for _, sub := range subs {
		if bytes.Contains(s, []byte(sub)) {
			return true
		}
	}
	return false
}
