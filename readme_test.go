package dlock_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// snippet is one ```go block of a Markdown file.
type snippet struct {
	file string
	line int
	code string
}

// snippetNeeds is how a snippet asks for a server: a line
// "// dlock-snippet: needs redis" (or postgres, etcd) in its code; the
// test then starts that server and sets DLOCK_URL. Without it, DLOCK_URL
// is empty: the embedded default backend.
var snippetNeeds = regexp.MustCompile(`// dlock-snippet: needs (redis|postgres|etcd)`)

// TestDocSnippets builds and runs every ```go block of README.md and
// docs/*.md: each must be a complete program that exits 0, so that a user
// who copies one gets working code. A fragment fails the test.
func TestDocSnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every snippet")
	}
	files, _ := filepath.Glob("docs/*.md")
	var snippets []snippet
	for _, f := range append([]string{"README.md"}, files...) {
		snippets = append(snippets, goBlocks(t, f)...)
	}
	if len(snippets) == 0 {
		t.Fatal("no go blocks found in README.md: the extractor is broken")
	}
	bins := buildSnippets(t, snippets)
	for i, s := range snippets {
		t.Run(filepath.Base(s.file)+":"+strconv.Itoa(s.line), func(t *testing.T) {
			runSnippet(t, s, bins[i])
		})
	}
}

// goBlocks extracts the ```go blocks of a Markdown file.
func goBlocks(t *testing.T, file string) []snippet {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []snippet
	var cur *snippet
	for i, line := range strings.Split(string(data), "\n") {
		switch {
		case cur == nil && strings.TrimSpace(line) == "```go":
			cur = &snippet{file: file, line: i + 1}
		case cur != nil && strings.TrimSpace(line) == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil:
			cur.code += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: unterminated ```go block", file, cur.line)
	}
	return out
}

// buildSnippets writes each complete program into its own directory in
// the module (a leading underscore keeps it out of ./...) and builds them
// all in one go build; it returns the binaries, "" for a fragment.
func buildSnippets(t *testing.T, snippets []snippet) []string {
	t.Helper()
	binDir := t.TempDir()
	bins := make([]string, len(snippets))
	args := []string{"build", "-o", binDir + string(filepath.Separator)}
	for i, s := range snippets {
		if !strings.HasPrefix(strings.TrimSpace(s.code), "package main") {
			t.Errorf("%s:%d: a go block must be a complete program (package main) that runs", s.file, s.line)
			continue
		}
		dir, err := os.MkdirTemp(".", "_snippet")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.WriteFile(filepath.Join(dir, "main.go"), []byte(s.code), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "./"+filepath.ToSlash(dir))
		bins[i] = filepath.Join(binDir, filepath.Base(dir))
	}
	if len(args) == 3 {
		return bins
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "go", args...).CombinedOutput(); err != nil {
		t.Fatalf("go build of the snippets: %v\n%s", err, out)
	}
	return bins
}

// runSnippet runs one built snippet with a private state directory and the
// server it asks for, and wants exit status 0.
func runSnippet(t *testing.T, s snippet, bin string) {
	if bin == "" {
		t.Skip("not a program (reported above)")
	}
	url := ""
	if m := snippetNeeds.FindStringSubmatch(s.code); m != nil {
		switch m[1] {
		case "redis":
			url = testserver.Redis(t).URL()
		case "postgres":
			url = testserver.Postgres(t).NewDatabase(t)
		case "etcd":
			url = testserver.Etcd(t).URL()
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "DLOCK_URL="+url, "XDG_STATE_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s:%d: the snippet failed: %v\n%s", s.file, s.line, err, out)
	}
	t.Logf("%s:%d:\n%s", s.file, s.line, out)
}
