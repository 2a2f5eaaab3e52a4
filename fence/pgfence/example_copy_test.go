package pgfence_test

import (
	"bytes"
	"context"
	"go/doc"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	_ "github.com/dlockdev/dlock/pglock"
	"github.com/jackc/pgx/v5/pgxpool"
)

// exampleURL is the database URL the package Example is written with; the
// copy below runs it against a test server instead.
const exampleURL = "postgres://localhost/bank"

// TestExampleRunsAsCopied: the package Example, made into the program a
// user gets by copying it (go/doc's playable version: its body and the
// imports it uses, blank ones included), builds and runs against a real
// PostgreSQL and writes the fenced balance. An Example that relies on an
// import only this package's other test files make (a driver registered
// for dlock.Open) fails here, as it would for the user.
func TestExampleRunsAsCopied(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	url := testserver.Postgres(t).NewDatabase(t)
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pool.Exec(ctx, `CREATE TABLE accounts (id int PRIMARY KEY, fence bigint NOT NULL, balance int)`); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO accounts VALUES (42, 0, 0)`); err != nil {
		t.Fatal(err)
	}
	migrate(t, url)

	src := playableExample(t)
	if !strings.Contains(src, `"`+exampleURL+`"`) {
		t.Fatalf("the Example no longer opens %s:\n%s", exampleURL, src)
	}
	out := buildAndRun(t, strings.ReplaceAll(src, `"`+exampleURL+`"`, `"`+url+`"`))
	var balance int
	if err := pool.QueryRow(ctx, `SELECT balance FROM accounts WHERE id = 42`).Scan(&balance); err != nil || balance != 100 {
		t.Fatalf("balance = %d, %v after the Example; want 100\n%s", balance, err, out)
	}
}

// migrate creates dlock's lease table, as `dlock migrate` would once.
func migrate(t *testing.T, url string) {
	t.Helper()
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if err := l.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// playableExample is the package Example of example_test.go as a whole
// program, as go/doc makes it for "Run" buttons and copying.
func playableExample(t *testing.T) string {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "example_test.go", nil, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, ex := range doc.Examples(f) {
		if ex.Name != "" || ex.Play == nil {
			continue
		}
		var b bytes.Buffer
		if err := format.Node(&b, fset, ex.Play); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	t.Fatal("no playable package Example in example_test.go")
	return ""
}

// buildAndRun builds src in a directory of this module (a leading
// underscore keeps it out of ./...) and runs it; it must exit 0.
func buildAndRun(t *testing.T, src string) string {
	t.Helper()
	dir, err := os.MkdirTemp(".", "_example")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	bin := filepath.Join(t.TempDir(), "example")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "./"+filepath.ToSlash(dir)).CombinedOutput(); err != nil {
		t.Fatalf("go build of the copied Example: %v\n%s\n%s", err, out, src)
	}
	out, err := exec.CommandContext(ctx, bin).CombinedOutput()
	if err != nil {
		t.Fatalf("the copied Example failed: %v\n%s\n%s", err, out, src)
	}
	return string(out)
}
