package pglock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"sync"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

func init() {
	dlock.Register(Scheme, open)
	dlock.Register(SchemeAlt, open)
}

// Query keys this package reads from a URL and removes before pgx sees it.
const (
	keyMode  = "mode"
	keyTable = "table"
)

// open builds a driver from a postgres:// or postgresql:// URL. The URL
// goes to pgxpool.ParseConfig unchanged but for the keys mode and table;
// other keys prefixed "dlock" are rejected as unknown (everything else is
// pgx's or the server's, e.g. sslmode, pool_max_conns, application_name).
// The pool is checked with a ping, so a wrong address or password fails
// here, and it is closed with the driver.
func open(ctx context.Context, rawURL string) (driver.Driver, error) {
	cfg, rest, err := parseURL(rawURL)
	if err != nil {
		return nil, err
	}
	pcfg, err := pgxpool.ParseConfig(rest)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", dlock.ErrInvalidArgument, err)
	}
	dialer := newCheckedDialer(pcfg.ConnConfig.DialFunc)
	pcfg.ConnConfig.DialFunc = dialer.dial
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, err
	}
	// The ping: it also reads the one setting that silently breaks fences.
	var syncCommit string
	if err := pool.QueryRow(ctx, "SHOW synchronous_commit").Scan(&syncCommit); err != nil {
		pool.Close()
		if bad := badSetting(err); bad != nil {
			return nil, bad
		}
		return nil, (&base{}).classifyAdmin(connectFailure(err, dialer))
	}
	dialer.settle()
	if syncCommit == "off" {
		cc := pcfg.ConnConfig
		warnOnce(driver.LoggerFrom(ctx), fmt.Sprintf("%s:%d/%s", cc.Host, cc.Port, cc.Database),
			"dlock: postgres synchronous_commit=off: a server crash can lose the last commits, and fences handed out just before it can be handed out again; set synchronous_commit=on for the role or database that takes locks (dlock doctor checks it)")
	}
	drv, err := cfg.newDriver(pool, true, redact(rawURL))
	if err != nil {
		pool.Close()
		return nil, err
	}
	return drv, nil
}

// parseURL takes this package's keys out of rawURL.
func parseURL(rawURL string) (Config, string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return Config{}, "", fmt.Errorf("%w: malformed URL", dlock.ErrInvalidArgument)
	}
	if u.Scheme != Scheme && u.Scheme != SchemeAlt {
		return Config{}, "", fmt.Errorf("%w: scheme %q is not %s or %s", dlock.ErrInvalidArgument, u.Scheme, Scheme, SchemeAlt)
	}
	// Strictly: Go's URL.Query drops a pair with a ';' (mode=advisory;
	// would open lease mode, another lock space) and pgx keeps the last of
	// a repeated key; both are refused here.
	q, err := driver.ParseQuery(u.RawQuery)
	if err == nil {
		err = driver.Unique(q)
	}
	if err != nil {
		return Config{}, "", fmt.Errorf("%w: postgres URL: %v", dlock.ErrInvalidArgument, err)
	}
	cfg := Config{Mode: Mode(q.Get(keyMode)), Table: q.Get(keyTable)}
	if q.Has(keyMode) && cfg.Mode == "" {
		return Config{}, "", fmt.Errorf("%w: URL query mode is empty (want %s or %s)", dlock.ErrInvalidArgument, Lease, Advisory)
	}
	q.Del(keyMode)
	q.Del(keyTable)
	for k := range q {
		if strings.HasPrefix(strings.ToLower(k), "dlock") {
			return Config{}, "", fmt.Errorf("%w: unknown URL query key %q (pglock knows mode and table)", dlock.ErrInvalidArgument, k)
		}
	}
	if _, err := cfg.mode(); err != nil {
		return Config{}, "", err
	}
	driver.StripQuery(u, keyMode, keyTable)
	return cfg, u.String(), nil
}

// badSetting turns the server's refusal of a setting the URL passed on
// (pgx sends every query key it does not know itself as a run-time
// parameter) into an invalid argument: a key that is nobody's, or a bad
// value for a server setting. It returns nil for any other error.
func badSetting(err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil
	}
	switch pgErr.Code {
	case codeUnknownSetting:
		return fmt.Errorf("%w: postgres URL: a query key is neither pglock's (mode, table), dlock's (ttl, wait, owner, migrate), pgx's, nor a PostgreSQL setting: the server says %s", dlock.ErrInvalidArgument, pgErr.Message)
	case codeBadSettingValue:
		return fmt.Errorf("%w: postgres URL: the server refuses a setting the query gives: %s", dlock.ErrInvalidArgument, pgErr.Message)
	}
	return nil
}

// warned holds the servers a warning was logged for.
// Process-wide so that a warning names a server once however many Lockers (one per job, say) open it.
var warned sync.Map

// warnOnce logs msg at Warn for server the first time only.
func warnOnce(logger *slog.Logger, server, msg string) {
	if _, seen := warned.LoadOrStore(server+"\x00"+msg, true); !seen {
		logger.Warn(msg, "server", server)
	}
}

var (
	_ driver.SettingsReporter = (*advisory)(nil)
	_ driver.SettingsReporter = (*leases)(nil)
)

// Settings implements driver.SettingsReporter: mode and table, as a URL
// gives them.
func (b *base) Settings() map[string]string {
	return map[string]string{keyMode: string(b.mode), keyTable: strings.Join(b.ident, ".")}
}
