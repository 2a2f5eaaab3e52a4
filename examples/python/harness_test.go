package python_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	_ "github.com/dlockdev/dlock/memlock"
	"github.com/dlockdev/dlock/serve"
)

// script is the client under test.
const script = "dlock_client.py"

// python3 returns the interpreter, skipping the test without one unless
// DLOCK_TEST_REQUIRE_SERVERS=1.
func python3(t *testing.T) string {
	t.Helper()
	return testserver.Binary(t, "python3")
}

// server is a real serve.Server under httptest, on a mem:// backend.
type server struct {
	URL, Token, Admin string
}

// startServer serves the API for the test; everything stops in Cleanup.
func startServer(t *testing.T) server {
	t.Helper()
	ctx := context.Background()
	l, err := dlock.Open(ctx, "mem://py-"+randomHex(4))
	if err != nil {
		t.Fatal(err)
	}
	s := server{Token: randomHex(16), Admin: randomHex(16)}
	srv, err := serve.New(serve.Config{Locker: l, Tokens: []string{s.Token}, AdminTokens: []string{s.Admin}})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	s.URL = ts.URL
	t.Cleanup(func() {
		_ = srv.Close()
		ts.Close()
		_ = l.Close()
	})
	return s
}

// env is the script's environment; withAdmin adds the admin token.
func (s server) env(db, name string, withAdmin bool) []string {
	e := []string{"DLOCK_SERVE=" + s.URL, "DLOCK_SERVE_TOKEN=" + s.Token, "DLOCK_DB=" + db, "DLOCK_NAME=" + name,
		"DLOCK_SERVE_ADMIN_TOKEN=", "PYTHONDONTWRITEBYTECODE=1"}
	if withAdmin {
		e = append(e, "DLOCK_SERVE_ADMIN_TOKEN="+s.Admin)
	}
	return e
}

// forceRelease evicts name's holder through the API with the admin token.
func (s server) forceRelease(t *testing.T, name string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/locks/"+name+"/force-release", strings.NewReader("{}"))
	req.Header.Set("Authorization", "Bearer "+s.Admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out struct {
		Evicted *struct {
			Fence uint64 `json:"fence"`
		} `json:"evicted"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK || out.Evicted == nil {
		t.Fatalf("force-release %s: %s, %v, evicted %v", name, resp.Status, err, out.Evicted)
	}
}

// fields parses a script line "what k=v k=v" (values JSON-quoted when
// they hold spaces).
func fields(t *testing.T, line string) map[string]string {
	t.Helper()
	m := map[string]string{}
	what, rest, _ := strings.Cut(line, " ")
	m[""] = what
	for rest != "" {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			t.Fatalf("line %q: no k=v in %q", line, rest)
		}
		if strings.HasPrefix(v, `"`) {
			dec := json.NewDecoder(strings.NewReader(v))
			var s string
			if err := dec.Decode(&s); err != nil {
				t.Fatalf("line %q: %v", line, err)
			}
			m[k], rest = s, strings.TrimSpace(v[dec.InputOffset():])
			continue
		}
		m[k], rest, _ = strings.Cut(v, " ")
	}
	return m
}

// fenceOf is the fence=N field of line.
func fenceOf(t *testing.T, line string) uint64 {
	t.Helper()
	f, err := strconv.ParseUint(fields(t, line)["fence"], 10, 64)
	if err != nil {
		t.Fatalf("no fence in %q: %v", line, err)
	}
	return f
}

// openDB opens the SQLite file the script writes, as the Go guard does.
func openDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(5000)")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// row reads name's fence and value.
func row(t *testing.T, db *sql.DB, name string) (uint64, string) {
	t.Helper()
	var f uint64
	var v string
	if err := db.QueryRow(`SELECT fence, value FROM resources WHERE name = ?`, name).Scan(&f, &v); err != nil {
		t.Fatalf("read row %q: %v", name, err)
	}
	return f, v
}

// tempDB is a fresh database path in the test's directory.
func tempDB(t *testing.T) string { return filepath.Join(t.TempDir(), "app.db") }

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// timeout bounds each script run.
const timeout = time.Minute
