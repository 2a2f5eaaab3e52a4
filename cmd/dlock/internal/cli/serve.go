package cli

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/spf13/cobra"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/metrics"
	"github.com/dlockdev/dlock/serve"
	"github.com/dlockdev/dlock/serve/dashboard"
)

// Environment variables of dlock serve: tokens, for deployments that pass
// secrets as environment rather than files.
const (
	envServeToken      = "DLOCK_SERVE_TOKEN"
	envServeAdminToken = "DLOCK_SERVE_ADMIN_TOKEN"
)

type serveOptions struct {
	url            string
	listen         string
	tokenFile      string
	adminTokenFile string
	insecureNoAuth bool
	tlsCert        string
	tlsKey         string
	clientCA       string
	trustedProxies []string
	maxConns       int
	signInLink     string
	leaseKeyFile   string
}

const serveLong = `Serve fenced leases over HTTP/JSON to programs in any language, with a live
dashboard at / and Prometheus metrics at /metrics. docs/serve.md has every endpoint
and a curl walkthrough; /openapi.json is the OpenAPI document.

Clients authenticate with a bearer token (--token-file, one per line, or
$DLOCK_SERVE_TOKEN) or a TLS client certificate signed by --client-ca (mTLS).
Force-release needs an admin token (--admin-token-file or $DLOCK_SERVE_ADMIN_TOKEN).
--insecure-no-auth serves without authentication, and only on a loopback address.
Behind a load balancer, name it with --trusted-proxy so that clients are told apart
by X-Forwarded-For (limits on connections and failed sign-ins are per client address).

At start, on a terminal, dlock serve prints a one-time link that signs a browser in
to the dashboard (valid once, for 10 minutes; --signin-link). A running server makes
another for a token holder: POST /v1/signin-links.

The server holds each lease for its client while the client shows it is alive (an
open events stream, or a renew within the TTL); a client that vanishes loses its
lease within its TTL. SIGINT or SIGTERM releases every lease and stops.

Replicas: start several servers on one backend with the same --lease-key-file (each
line a secret of at least 32 characters, e.g. openssl rand -hex 32; the first seals new
lease ids, every line opens them, so a key can be rotated). Any replica then renews,
follows and releases any lease, and a replica that stops or dies costs no lease whose
client turns to another within the TTL: on SIGINT or SIGTERM a replica hands its leases
on (event "handoff") instead of releasing them.`

func newServeCmd(g *globalOptions, std *IO) *cobra.Command {
	o := &serveOptions{}
	cmd := &cobra.Command{
		Use:   "serve [flags]",
		Short: "Serve fenced leases over HTTP, with a dashboard and metrics",
		Long:  serveLong,
		Example: `  DLOCK_SERVE_TOKEN=$(openssl rand -hex 32) dlock serve --url redis://10.0.0.5:6379
  dlock serve --listen :7443 --tls-cert srv.pem --tls-key srv.key --client-ca ca.pem --admin-token-file admin.txt
  dlock serve --insecure-no-auth     # loopback only: a local tryout
  dlock serve --url redis://10.0.0.5:6379 --token-file tokens.txt --lease-key-file lease-keys.txt   # one of several replicas`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.url = g.URL
			return runServe(cmd.Context(), o, std)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.listen, "listen", "127.0.0.1:7070", "address to listen on")
	f.StringVar(&o.tokenFile, "token-file", "", "file of client bearer tokens, one per line")
	f.StringVar(&o.adminTokenFile, "admin-token-file", "", "file of admin bearer tokens (force-release), one per line")
	f.BoolVar(&o.insecureNoAuth, "insecure-no-auth", false, "serve without authentication (loopback addresses only)")
	f.StringVar(&o.tlsCert, "tls-cert", "", "serve HTTPS with this certificate (PEM)")
	f.StringVar(&o.tlsKey, "tls-key", "", "the certificate's private key (PEM)")
	f.StringVar(&o.clientCA, "client-ca", "", "require client certificates signed by this CA (PEM): mTLS")
	f.StringArrayVar(&o.trustedProxies, "trusted-proxy", nil,
		"address or CIDR of a proxy in front of the server, whose X-Forwarded-For names the client (repeatable)")
	f.IntVar(&o.maxConns, "max-conns-per-client", serve.DefaultMaxConnsPerClient,
		"connections one client address may hold at once (behind a trusted proxy: requests in flight)")
	f.StringVar(&o.leaseKeyFile, "lease-key-file", "",
		"run as one of several replicas on one backend: file of shared lease keys, one per line, the first sealing new lease ids")
	f.StringVar(&o.signInLink, "signin-link", signInAuto,
		"print a one-time dashboard sign-in link at start: auto (when stderr is a terminal), always (into logs too), never")
	return cmd
}

// tokens reads a token file and an environment variable; "" file is none.
func readTokens(file, env string) ([]string, error) {
	var out []string
	if file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, usageErr("token file: %v", err)
		}
		for _, line := range strings.Split(string(data), "\n") {
			if t := strings.TrimSpace(line); t != "" && !strings.HasPrefix(t, "#") {
				out = append(out, t)
			}
		}
		if len(out) == 0 {
			return nil, usageErr("token file %s holds no token", file)
		}
	}
	if t := strings.TrimSpace(os.Getenv(env)); t != "" {
		out = append(out, t)
	}
	return out, nil
}

func (o *serveOptions) check() error {
	if (o.tlsCert == "") != (o.tlsKey == "") {
		return usageErr("--tls-cert and --tls-key go together")
	}
	if o.clientCA != "" && o.tlsCert == "" {
		return usageErr("--client-ca needs --tls-cert and --tls-key (mTLS is TLS)")
	}
	host, _, err := net.SplitHostPort(o.listen)
	if err != nil {
		return usageErr("--listen %q: %v", o.listen, err)
	}
	if o.insecureNoAuth && !isLoopback(host) {
		return usageErr("--insecure-no-auth serves anyone who can connect: it is allowed only on a loopback address, not --listen %q", o.listen)
	}
	if o.maxConns < 1 {
		return usageErr("--max-conns-per-client %d: want at least 1", o.maxConns)
	}
	return nil
}

// proxies parses --trusted-proxy: a CIDR prefix, or one address.
func (o *serveOptions) proxies() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, p := range o.trustedProxies {
		pfx, err := netip.ParsePrefix(p)
		if err != nil {
			a, aerr := netip.ParseAddr(p)
			if aerr != nil {
				return nil, usageErr("--trusted-proxy %q: want an address or a CIDR prefix such as 10.0.0.0/8", p)
			}
			pfx = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, pfx.Masked())
	}
	return out, nil
}

// loopbackOnly reports whether --listen is a loopback address only.
func (o *serveOptions) loopbackOnly() bool {
	host, _, err := net.SplitHostPort(o.listen)
	return err == nil && isLoopback(host)
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func (o *serveOptions) tlsConfig() (*tls.Config, error) {
	if o.tlsCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(o.tlsCert, o.tlsKey)
	if err != nil {
		return nil, usageErr("--tls-cert/--tls-key: %v", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if o.clientCA != "" {
		pem, err := os.ReadFile(o.clientCA)
		if err != nil {
			return nil, usageErr("--client-ca: %v", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, usageErr("--client-ca %s holds no PEM certificate", o.clientCA)
		}
		cfg.ClientCAs, cfg.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// serveAuth is how dlock serve authenticates clients, read from the flags
// and the environment.
type serveAuth struct {
	tokens, admins []string
	tls            *tls.Config // nil: plain HTTP
	proxies        []netip.Prefix
	leaseKeys      [][]byte // --lease-key-file: one of several replicas
}

// clientCerts reports whether clients may authenticate with a certificate.
func (a serveAuth) clientCerts() bool { return a.tls != nil && a.tls.ClientCAs != nil }

// scheme is the URL scheme clients reach the server with.
func (a serveAuth) scheme() string {
	if a.tls != nil {
		return "https"
	}
	return "http"
}

// readAuth checks the flags and reads the tokens, the TLS files and the
// trusted proxies. A server nobody could authenticate to, other than an
// --insecure-no-auth one, is a usage error.
func (o *serveOptions) readAuth() (a serveAuth, err error) {
	if err := o.check(); err != nil {
		return a, err
	}
	if a.tokens, err = readTokens(o.tokenFile, envServeToken); err != nil {
		return a, err
	}
	if a.admins, err = readTokens(o.adminTokenFile, envServeAdminToken); err != nil {
		return a, err
	}
	if a.tls, err = o.tlsConfig(); err != nil {
		return a, err
	}
	if a.proxies, err = o.proxies(); err != nil {
		return a, err
	}
	if a.leaseKeys, err = readLeaseKeys(o.leaseKeyFile); err != nil {
		return a, err
	}
	if len(a.tokens)+len(a.admins) == 0 && !o.insecureNoAuth && !a.clientCerts() {
		return a, usageErr("no authentication: give --token-file (or $%s), --client-ca, or --insecure-no-auth on loopback", envServeToken)
	}
	return a, o.checkSignIn(len(a.tokens) + len(a.admins))
}

func runServe(ctx context.Context, o *serveOptions, std *IO) error {
	auth, err := o.readAuth()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	l, err := openLocker(ctx, o.url)
	if err != nil {
		return err
	}
	defer l.Close()
	log := slog.New(slog.NewTextHandler(std.Err, nil))
	srv, err := newServer(l, o, auth, log)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.listen)
	if err != nil {
		_ = srv.Close()
		return fmt.Errorf("dlock serve: %w", err)
	}
	ln = srv.Listener(ln)
	hs := &http.Server{Handler: srv, TLSConfig: auth.tls, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute,
		ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	fmt.Fprintf(std.Err, "dlock serve: %s://%s, backend %s (dashboard at /, metrics at /metrics)\n", auth.scheme(), ln.Addr(), l.Backend())
	printSignInLink(std.Err, o, std.ErrTTY, srv, auth.scheme(), ln.Addr())
	return serveUntilStopped(ctx, hs, srv, ln, std)
}

// newServer builds the HTTP service over l, its metrics on a registry of
// its own with the Go runtime's and the process's.
func newServer(l *dlock.Locker, o *serveOptions, auth serveAuth, log *slog.Logger) (*serve.Server, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := metrics.Instrument(l, reg); err != nil {
		return nil, err
	}
	srv, err := serve.New(serve.Config{
		Locker: l, Tokens: auth.tokens, AdminTokens: auth.admins,
		ClientCerts: auth.clientCerts(), InsecureNoAuth: o.insecureNoAuth,
		LoopbackOnly:   o.loopbackOnly(),
		TrustedProxies: auth.proxies, MaxConnsPerClient: o.maxConns,
		Metrics:   promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Dashboard: dashboard.Handler(), Logger: log, LeaseKeys: auth.leaseKeys,
	})
	if err != nil {
		return nil, usageErr("%v", err)
	}
	return srv, nil
}

// serveUntilStopped serves on ln until ctx is done (SIGINT, SIGTERM) or
// serving fails, then releases every lease and shuts the server down.
func serveUntilStopped(ctx context.Context, hs *http.Server, srv *serve.Server, ln net.Listener, std *IO) error {
	errc := make(chan error, 1)
	go func() {
		if hs.TLSConfig != nil {
			errc <- hs.ServeTLS(ln, "", "")
		} else {
			errc <- hs.Serve(ln)
		}
	}()
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	// Release every lease first: streams end, so Shutdown does not wait on them.
	cerr := srv.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = hs.Shutdown(sctx)
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("dlock serve: %w", err)
	}
	fmt.Fprintln(std.Err, "dlock serve: stopped; leases released")
	return cerr
}

// readLeaseKeys reads --lease-key-file: one key per line, blank lines and
// # comments skipped; "" is none. Errors name the file and the line,
// never a key.
func readLeaseKeys(file string) ([][]byte, error) {
	if file == "" {
		return nil, nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, usageErr("--lease-key-file: %v", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(data), "\n") {
		k := strings.TrimSpace(line)
		if k == "" || strings.HasPrefix(k, "#") {
			continue
		}
		if len(k) < minLeaseKey {
			return nil, usageErr("--lease-key-file %s: line %d holds a key of %d characters, want at least %d (e.g. openssl rand -hex 32)",
				file, i+1, len(k), minLeaseKey)
		}
		keys = append(keys, []byte(k))
	}
	if len(keys) == 0 {
		return nil, usageErr("--lease-key-file %s holds no key", file)
	}
	return keys, nil
}

// minLeaseKey is the shortest lease key (serve.Config.LeaseKeys).
const minLeaseKey = 32
