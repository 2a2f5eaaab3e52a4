package serve

import (
	"net/http"
	"net/netip"
	"strings"
)

// clientAddr names the client a request comes from: the peer's address,
// or, when the peer is a trusted proxy, the last address in
// X-Forwarded-For that is not one (what a client writes there itself
// comes before what the proxies append, so it is never reached). An
// IPv6 client is named by its /64, the block one host is usually given.
func (s *Server) clientAddr(r *http.Request) string {
	peer, ok := parseAddr(r.RemoteAddr)
	if !ok {
		return r.RemoteAddr
	}
	if !s.trusted(peer) {
		return addrKey(peer)
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseAddr(strings.TrimSpace(hops[i]))
		if !ok {
			break // a proxy wrote what is not an address: the proxy answers for it
		}
		if !s.trusted(a) {
			return addrKey(a)
		}
		peer = a
	}
	return addrKey(peer)
}

// trusted reports whether a is one of Config.TrustedProxies.
func (s *Server) trusted(a netip.Addr) bool {
	for _, p := range s.cfg.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// parseAddr reads "ip", "ip:port" or "[ip]:port".
func parseAddr(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.Addr().Unmap(), true
	}
	a, err := netip.ParseAddr(strings.Trim(s, "[]"))
	return a.Unmap(), err == nil
}

// addrKey is the name of a client address: the address itself, or an
// IPv6 address's /64.
func addrKey(a netip.Addr) string {
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}
