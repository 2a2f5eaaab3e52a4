package testserver

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// toxiServer is the in-process toxiproxy every Proxy of a test binary
// hangs off (it only holds the proxies' registry; there is no HTTP API).
var toxiServer = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
})

// Proxy is a TCP proxy on a free loopback port in front of a server,
// through which faults are injected with toxiproxy's toxics (latency,
// timeout, reset_peer, ...). It runs in-process and is stopped in
// t.Cleanup.
type Proxy struct {
	// Addr is the proxy's host:port: point the client here.
	Addr string
	p    *toxiproxy.Proxy
}

// NewProxy starts a proxy forwarding to upstream (host:port).
func NewProxy(t testing.TB, upstream string) *Proxy {
	t.Helper()
	p := toxiproxy.NewProxy(toxiServer(), t.Name(), "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy: %v", err)
	}
	t.Cleanup(p.Stop)
	return &Proxy{Addr: p.Listen, p: p}
}

// Toxic adds a toxic: typ is toxiproxy's type ("latency", "timeout",
// "reset_peer", "limit_data", ...), stream "upstream" (client to server)
// or "downstream", attrs its attributes (e.g. {"latency": 500} in ms,
// {"timeout": 0}: drop everything until removed).
func (p *Proxy) Toxic(t testing.TB, name, typ, stream string, attrs map[string]any) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "attributes": attrs})
	if _, err := p.p.Toxics.AddToxicJson(bytes.NewReader(body)); err != nil {
		t.Fatalf("toxiproxy: add %s: %v", typ, err)
	}
}

// Clear removes every toxic; connections that survived them carry data
// again.
func (p *Proxy) Clear() { p.p.Toxics.ResetToxics(context.Background()) }

// Stop closes the proxy and every connection through it. It is
// idempotent.
func (p *Proxy) Stop() { p.p.Stop() }
