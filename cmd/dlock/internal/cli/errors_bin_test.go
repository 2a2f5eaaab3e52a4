package cli

import (
	"fmt"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestFailuresAreOneLine: bad flags, bad URLs and unreachable servers each
// give one line on stderr and a non-zero exit, never a stack trace.
func TestFailuresAreOneLine(t *testing.T) {
	closed := testserver.FreePort(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		// want is what the line must say (the way out), when set; not is
		// what it must not.
		want, not string
	}{
		{"unknown flag", []string{"run", "--bogus", "x", "--", "true"}, ExitUsage, "", ""},
		{"bad duration", []string{"run", "--wait", "soon", "x", "--", "true"}, ExitUsage, "", ""},
		{"missing command", []string{"run", "x"}, ExitUsage, "", ""},
		{"unknown command", []string{"frobnicate"}, ExitUsage, "", ""},
		{"missing name", []string{"inspect"}, ExitUsage, "", ""},
		{"release without --force", []string{"release", "x"}, ExitUsage, "", ""},
		{"unknown scenario", []string{"demo", "nope"}, ExitUsage, "", ""},
		{"unbounded bench", []string{"bench", "--duration", "1h"}, ExitUsage, "", ""},
		{"wait out of range", []string{"run", "--wait", "3000000h", "x", "--", "true"}, ExitUsage, "", ""},
		{"zero period", []string{"run", "--once-per", "0s", "x", "--", "true"}, ExitUsage, "", ""},
		{"negative period", []string{"run", "--once-per", "-1h", "x", "--", "true"}, ExitUsage, "", ""},
		{"malformed cron expression", []string{"run", "--schedule", "61 * * * *", "x", "--", "true"}, ExitUsage, "", ""},
		{"slots with permits", []string{"run", "--once-per", "1h", "--permits", "2", "x", "--", "true"}, ExitUsage, "", ""},
		{"keep-runs out of range", []string{"run", "--once-per", "1h", "--keep-runs", "0", "x", "--", "true"}, ExitUsage, "", ""},
		{"keep-runs without a slot", []string{"run", "--keep-runs", "5", "x", "--", "true"}, ExitUsage, "", ""},
		{"once-per and schedule", []string{"run", "--once-per", "1h", "--schedule", "@daily", "x", "--", "true"}, ExitUsage, "", ""},
		{"unknown scheme", []string{"--url", "foo://x", "ls"}, ExitUsage, "", ""},
		{"malformed URL", []string{"--url", "://nope", "ls"}, ExitUsage, "", ""},
		{"relative file path", []string{"--url", "file:relative.db", "ls"}, ExitUsage, "", ""},
		{"unknown query key", []string{"--url", "redis://127.0.0.1:1/?bogus=1", "ls"}, ExitUsage, "", ""},
		{"semicolon in a query", []string{"--url", "redis://127.0.0.1:1/?fair=false;x", "ls"}, ExitUsage, "", ""},
		{"repeated query key", []string{"--url", "redis://127.0.0.1:1/?ttl=1s&ttl=5s", "ls"}, ExitUsage, "", ""},
		{"negative database", []string{"--url", "redis://127.0.0.1:1/-1", "ls"}, ExitUsage, "", ""},
		{"ttl out of range in a URL", []string{"--url", "redis://127.0.0.1:1/?ttl=9999999999h", "ls"}, ExitUsage, "", ""},
		{"no scheme", []string{"--url", "127.0.0.1:26481", "ls"}, ExitUsage,
			`no scheme in URL "127.0.0.1:26481"; e.g. redis://127.0.0.1:26481`, ""},
		{"no scheme, a password", []string{"--url", "u:pw-nos@127.0.0.1:5432/db", "ls"}, ExitUsage,
			"e.g. postgres://u:xxxxx@127.0.0.1:5432/db", ""},
		{"no // after the scheme", []string{"--url", "redis:/127.0.0.1:26481", "ls"}, ExitUsage,
			"URL has no host: the scheme needs \"//\" after its colon; did you mean redis://127.0.0.1:26481?", ""},
		{"mistyped scheme", []string{"--url", "reddis://127.0.0.1:1", "ls"}, ExitUsage,
			`unknown URL scheme "reddis"; did you mean redis? (schemes: etcd, file, mariadb, mem, mysql, postgres, postgresql, redis, rediss, redlock, zk)`, "import"},
		{"foreign scheme", []string{"--url", "http://127.0.0.1:1", "ls"}, ExitUsage,
			`unknown URL scheme "http" (schemes: etcd, file, mariadb, mem, mysql, postgres, postgresql, redis, rediss, redlock, zk)`, "import"},
		{"mistyped flag", []string{"run", "--ttll", "5s", "x", "--", "true"}, ExitUsage,
			"unknown flag: --ttll; did you mean --ttl? (see dlock run --help)", ""},
		{"ttl without a unit in a URL", []string{"--url", "redis://127.0.0.1:1/?ttl=5", "ls"}, ExitUsage,
			`ttl="5": missing unit: write 5s`, ""},
		{"mistyped mode in a URL", []string{"--url", "postgres://127.0.0.1:1/db?mode=advsory", "ls"}, ExitUsage,
			`pglock mode "advsory" (want "lease" or "advisory"); did you mean advisory?`, ""},
		{"unreachable redis", []string{"--url", fmt.Sprintf("redis://:pw-redis@127.0.0.1:%d", closed), "run", "x", "--", "true"}, ExitError, "", ""},
		{"unreachable postgres", []string{"--url", fmt.Sprintf("postgres://u:pw-pg@127.0.0.1:%d/db", closed), "ls"}, ExitError, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, nil, tc.args...)
			assertOneLine(t, r, tc.name)
			if r.code != tc.code {
				t.Errorf("exit %d, want %d: %s", r.code, tc.code, r.stderr)
			}
			if !strings.Contains(r.stderr, tc.want) || (tc.not != "" && strings.Contains(r.stderr, tc.not)) {
				t.Errorf("stderr %q\nwant it to say %q and not %q", r.stderr, tc.want, tc.not)
			}
			if strings.Contains(r.stderr, "pw-") {
				t.Errorf("the password leaked: %s", r.stderr)
			}
		})
	}
}

// TestWrongPasswordIsOneLine: a wrong password gives one line, without the
// password, and a non-zero exit.
func TestWrongPasswordIsOneLine(t *testing.T) {
	t.Run("redis", func(t *testing.T) {
		srv := testserver.Redis(t, "--requirepass", "right-pass")
		url := fmt.Sprintf("redis://:wrong-pass@%s", srv.Addr)
		r := runBin(t, nil, "--url", url, "run", "x", "--", "true")
		assertOneLine(t, r, "redis wrong password")
		if strings.Contains(r.stderr, "wrong-pass") {
			t.Errorf("the password leaked: %s", r.stderr)
		}
	})
	t.Run("postgres", func(t *testing.T) {
		srv := testserver.Postgres(t)
		r := runBin(t, nil, "--url", srv.AuthURL("postgres", "wrong-pass"), "ls")
		assertOneLine(t, r, "postgres wrong password")
		if strings.Contains(r.stderr, "wrong-pass") {
			t.Errorf("the password leaked: %s", r.stderr)
		}
	})
}

// TestUnreachableNamesOneBound: an unreachable server is reported with the
// bound that ran out, once: ZooKeeper's said both "within 5s" (its
// dial_timeout) and "within 15s" (the command's own bound, which had not
// run out).
func TestUnreachableNamesOneBound(t *testing.T) {
	closed := testserver.FreePort(t)
	r := runBin(t, nil, "--url", fmt.Sprintf("zk://127.0.0.1:%d?dial_timeout=1s", closed), "ls")
	assertOneLine(t, r, "unreachable zookeeper")
	if r.code != ExitError || !strings.Contains(r.stderr, "within 1s") || strings.Contains(r.stderr, "15s") {
		t.Errorf("exit %d, stderr %q: want exit 1 naming the 1s dial_timeout only", r.code, r.stderr)
	}
}

// TestWrongServerIsNamed: a URL at the other kind of server, a missing
// database and a role without privileges each give one line that names
// the cause and the way out, exit 1: postgresql:// at a Redis port waited
// out the 15 s bound and said "context deadline exceeded".
func TestWrongServerIsNamed(t *testing.T) {
	rd := testserver.Redis(t)
	pg := testserver.Postgres(t)
	db := pg.NewDatabase(t)
	if r := runBin(t, nil, "--url", db, "migrate"); r.code != 0 {
		t.Fatalf("migrate: exit %d: %s", r.code, r.stderr)
	}
	dbName := db[strings.LastIndex(db, "/")+1 : strings.Index(db, "?")]
	for _, tc := range []struct{ name, url, want string }{
		{"postgres URL at a Redis port", "postgresql://u:pw-wrong@" + rd.Addr + "/db",
			"did not answer as PostgreSQL (it answered like Redis: is this a redis:// address?)"},
		{"redis URL at a Postgres port", fmt.Sprintf("redis://:pw-wrong@127.0.0.1:%d", pg.Port),
			"did not answer as Redis (it answered like PostgreSQL: is this a postgres:// address?)"},
		{"missing database", fmt.Sprintf("postgres://dlock:pw-nodb@127.0.0.1:%d/nosuch_db", pg.Port),
			`database "nosuch_db" does not exist (SQLSTATE 3D000); create it`},
		{"role without privileges", pg.AuthURL(dbName, pg.Password),
			`permission denied for table dlock_leases (SQLSTATE 42501): the role lacks the privileges of pglock's lease mode; as the objects' owner, run: GRANT SELECT, INSERT, UPDATE, DELETE ON "dlock_leases"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, nil, "--url", tc.url, "run", "x", "--", "true")
			assertOneLine(t, r, tc.name)
			if r.code != ExitError || !strings.Contains(r.stderr, tc.want) || strings.Contains(r.stderr, "TLS") {
				t.Errorf("exit %d, stderr %q\nwant exit 1 saying %q", r.code, r.stderr, tc.want)
			}
			if strings.Contains(r.stderr, "pw-") || strings.Contains(r.stderr, pg.Password) {
				t.Errorf("the password leaked: %s", r.stderr)
			}
		})
	}
}
