package docblock

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const doc = `# Title

Prose a person wrote.

<!-- figures:begin -->
old figure 1
<!-- figures:end -->

More prose.
<!-- other-table:begin -->
<!-- other-table:end -->
`

func TestReplaceAndExtract(t *testing.T) {
	got, err := Replace(doc, "figures", "new figure 2")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(doc, "old figure 1\n", "new figure 2\n", 1); got != want {
		t.Errorf("Replace:\n%s\nwant:\n%s", got, want)
	}
	if text, err := Extract(got, "figures"); err != nil || text != "new figure 2\n" {
		t.Errorf("Extract = %q, %v", text, err)
	}
	got, err = Replace(got, "other-table", "| a |\n")
	if err != nil || !strings.Contains(got, "<!-- other-table:begin -->\n| a |\n<!-- other-table:end -->") {
		t.Errorf("Replace of an empty block = %v:\n%s", err, got)
	}
	if names := Names(got); len(names) != 2 || names[0] != "figures" || names[1] != "other-table" {
		t.Errorf("Names = %v", names)
	}
}

func TestReplaceRefusesBadMarkers(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"no markers\n", `no block "x"`},
		{"<!-- x:begin -->\n", `no block "x"`},
		{"<!-- x:end -->\n<!-- x:begin -->\n", "ends before it begins"},
		{"<!-- x:begin -->\n<!-- x:end -->\n<!-- x:begin -->\n<!-- x:end -->\n", "more than once"},
		{"text <!-- x:begin -->\n<!-- x:end -->\n", `no block "x"`}, // a marker stands alone on its line
	} {
		if _, err := Replace(tc.doc, "x", "y"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Replace(%q) = %v, want an error saying %q", tc.doc, err, tc.want)
		}
	}
}

// TestStaleAndUpdate: a block that differs from its rendering is stale
// (the error names the file, the block and the line); Update rewrites it
// and leaves the prose alone; a whole-file block is compared whole.
func TestStaleAndUpdate(t *testing.T) {
	dir := t.TempDir()
	md, svg := filepath.Join(dir, "doc.md"), filepath.Join(dir, "chart.svg")
	write(t, md, doc)
	write(t, svg, "<svg>old</svg>\n")
	blocks := []Block{
		{File: md, Name: "figures", Render: func() (string, error) { return "new figure 2", nil }},
		{File: md, Name: "other-table", Render: func() (string, error) { return "", nil }},
		{File: svg, Render: func() (string, error) { return "<svg>new</svg>\n", nil }},
	}
	errs := Stale(blocks)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "doc.md: block figures: stale: line 1") ||
		!strings.Contains(errs[0].Error(), `"new figure 2"`) || !strings.Contains(errs[1].Error(), "chart.svg: stale") {
		t.Fatalf("Stale = %v", errs)
	}
	if err := Update(blocks); err != nil {
		t.Fatal(err)
	}
	if errs := Stale(blocks); len(errs) != 0 {
		t.Errorf("after Update, Stale = %v", errs)
	}
	b, _ := os.ReadFile(md)
	if !strings.Contains(string(b), "Prose a person wrote.") || !strings.Contains(string(b), "new figure 2\n<!-- figures:end -->") {
		t.Errorf("updated doc:\n%s", b)
	}
}

// TestUnknownBlocks: a block named with the suite's prefix but without a
// renderer is reported; another suite's block is not.
func TestUnknownBlocks(t *testing.T) {
	md := filepath.Join(t.TempDir(), "doc.md")
	write(t, md, doc+"<!-- bench-old:begin -->\n1\n<!-- bench-old:end -->\n<!-- chaos-summary:begin -->\n<!-- chaos-summary:end -->\n")
	blocks := []Block{{File: md, Name: "figures", Render: func() (string, error) { return "", nil }}}
	errs := unknown(blocks, "bench-", nil)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `block "bench-old" has no renderer`) {
		t.Errorf("unknown = %v", errs)
	}
}

// TestUnknownBlocksInOtherFiles: a suite's block left behind in a file
// none of its blocks is in (a document the figures moved out of) is
// reported when that file is named; a named file that does not exist is
// not an error.
func TestUnknownBlocksInOtherFiles(t *testing.T) {
	dir := t.TempDir()
	md, readme := filepath.Join(dir, "doc.md"), filepath.Join(dir, "README.md")
	write(t, md, doc)
	write(t, readme, "<!-- bench-summary:begin -->\nold figures\n<!-- bench-summary:end -->\n")
	blocks := []Block{{File: md, Name: "figures", Render: func() (string, error) { return "", nil }}}
	if errs := unknown(blocks, "bench-", nil); len(errs) != 0 {
		t.Errorf("without README.md named: unknown = %v", errs)
	}
	errs := unknown(blocks, "bench-", []string{readme, filepath.Join(dir, "missing.md")})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `README.md: block "bench-summary" has no renderer`) {
		t.Errorf("unknown = %v", errs)
	}
}

// TestOptionalBlock: an optional block is not missed where its markers
// are not, and is checked where they are.
func TestOptionalBlock(t *testing.T) {
	md := filepath.Join(t.TempDir(), "doc.md")
	write(t, md, "no blocks\n")
	b := Block{File: md, Name: "figures", Optional: true, Render: func() (string, error) { return "x", nil }}
	if errs := Stale([]Block{b}); len(errs) != 0 {
		t.Errorf("an optional block without markers: Stale = %v", errs)
	}
	if err := Update([]Block{b}); err != nil {
		t.Errorf("an optional block without markers: Update = %v", err)
	}
	write(t, md, doc)
	if errs := Stale([]Block{b}); len(errs) != 1 {
		t.Errorf("an optional block with stale text: Stale = %v", errs)
	}
}

func TestStaleReportsMissingBlock(t *testing.T) {
	md := filepath.Join(t.TempDir(), "doc.md")
	write(t, md, "no blocks\n")
	errs := Stale([]Block{{File: md, Name: "figures", Render: func() (string, error) { return "x", nil }}})
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `no block "figures"`) {
		t.Errorf("Stale = %v", errs)
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
