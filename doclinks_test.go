package dlock_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline Markdown link or image: [text](target).
var mdLink = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// codeSpan matches inline code, where a "[x](y)" is not a link.
var codeSpan = regexp.MustCompile("`[^`]*`")

// TestDocLinks: every relative link in README.md and docs/*.md points at a
// file or directory of the repository, and every #anchor at a heading of
// its Markdown file (GitHub's anchors), so that a page moved or a heading
// renamed does not leave a dead link behind.
func TestDocLinks(t *testing.T) {
	files := docFiles(t)
	for _, file := range files {
		for _, l := range links(t, file) {
			if err := checkLink(file, l.target); err != "" {
				t.Errorf("%s:%d: link %q: %s", file, l.line, l.target, err)
			}
		}
	}
}

// TestDocsIndex: docs/README.md lists every page of docs/.
func TestDocsIndex(t *testing.T) {
	linked := map[string]bool{}
	for _, l := range links(t, "docs/README.md") {
		path, _, _ := strings.Cut(l.target, "#")
		linked[filepath.Clean(filepath.Join("docs", path))] = true
	}
	for _, f := range docFiles(t) {
		if f != "README.md" && f != filepath.Join("docs", "README.md") && !linked[f] {
			t.Errorf("docs/README.md does not list %s", f)
		}
	}
}

// TestCheckLinkCatchesDeadLinks: the checker refuses a missing file, a
// missing anchor and an anchor into a file that is not Markdown.
func TestCheckLinkCatchesDeadLinks(t *testing.T) {
	for _, target := range []string{"docs/missing.md", "docs/cli.md#no-such-heading", "#no-such-heading", "go.mod#x"} {
		if checkLink("README.md", target) == "" {
			t.Errorf("checkLink(README.md, %q) accepted a dead link", target)
		}
	}
	for _, target := range []string{"docs/cli.md", "docs/", "examples/billing", "#tests", "https://example.com/x"} {
		if err := checkLink("README.md", target); err != "" {
			t.Errorf("checkLink(README.md, %q): %s", target, err)
		}
	}
}

func docFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("docs/*.md")
	if err != nil || len(files) == 0 {
		t.Fatalf("no docs/*.md: %v", err)
	}
	return append([]string{"README.md"}, files...)
}

type link struct {
	line   int
	target string
}

// links lists the inline links of a Markdown file outside code blocks and
// code spans.
func links(t *testing.T, file string) []link {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []link
	inFence := false
	for i, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence {
			continue
		}
		for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(line, ""), -1) {
			out = append(out, link{line: i + 1, target: m[1]})
		}
	}
	return out
}

// checkLink says what is wrong with target, a link in file; "" if nothing.
func checkLink(file, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	path, anchor, hasAnchor := strings.Cut(target, "#")
	dest := file
	if path != "" {
		dest = filepath.Join(filepath.Dir(file), path)
		if _, err := os.Stat(dest); err != nil {
			return "no such file or directory: " + dest
		}
	}
	if !hasAnchor {
		return ""
	}
	if !strings.HasSuffix(dest, ".md") {
		return "an anchor into " + dest + ", which is not Markdown"
	}
	data, err := os.ReadFile(dest)
	if err != nil {
		return err.Error()
	}
	if !anchors(string(data))[anchor] {
		return "no heading of " + dest + " has the anchor #" + anchor
	}
	return ""
}

// anchors are the anchors GitHub gives a Markdown file's headings: the
// text lowercased, punctuation dropped, spaces as hyphens, and -1, -2, ...
// after a repeated one.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		text = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1")
		slug := slugify(text)
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func slugify(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
