// Package docblock keeps generated text in hand-written documents: a
// block of Markdown between two named markers,
//
//	<!-- NAME:begin -->
//	...rendered from a committed results file...
//	<!-- NAME:end -->
//
// is rewritten from its renderer, and a test fails while any block
// differs from what its renderer makes now, so that no figure in a
// document is typed by hand or left behind by a new results file. A Block
// with no name is a whole generated file (a chart).
//
// A suite that publishes figures lists its Blocks and calls Verify from a
// test: with update set (an environment variable of the suite's make
// target) it rewrites them, and otherwise it reports each stale block.
package docblock

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Block is one generated block of a document.
type Block struct {
	// File is the document's path.
	File string
	// Name names the block's markers; "" means the whole file.
	Name string
	// Render makes the block's text.
	Render func() (string, error)
	// Optional blocks are checked and rewritten where their markers are,
	// and not missed where they are not: a renderer offered for a
	// document that may carry the block.
	Optional bool
}

// Markers returns the lines that open and close the block name.
func Markers(name string) (begin, end string) {
	return "<!-- " + name + ":begin -->", "<!-- " + name + ":end -->"
}

// markerRE matches any block's opening marker, capturing its name.
var markerRE = regexp.MustCompile(`(?m)^<!-- ([A-Za-z0-9._-]+):begin -->$`)

// Names lists the blocks of doc, in order.
func Names(doc string) []string {
	var names []string
	for _, m := range markerRE.FindAllStringSubmatch(doc, -1) {
		names = append(names, m[1])
	}
	return names
}

// span finds the block name in doc: the text between its markers starts
// at i and ends at j. Each marker must stand alone on its line, once.
func span(doc, name string) (i, j int, err error) {
	begin, end := Markers(name)
	bi, ei := lineIndex(doc, begin), lineIndex(doc, end)
	switch {
	case bi < 0 || ei < 0:
		return 0, 0, fmt.Errorf("no block %q: want the lines %s and %s", name, begin, end)
	case lineIndex(doc[bi+len(begin):], begin) >= 0 || lineIndex(doc[ei+len(end):], end) >= 0:
		return 0, 0, fmt.Errorf("block %q is marked more than once", name)
	case ei < bi:
		return 0, 0, fmt.Errorf("block %q ends before it begins", name)
	}
	return bi + len(begin) + 1, ei, nil
}

// lineIndex is the index of the first line of doc equal to line, or -1.
func lineIndex(doc, line string) int {
	for i := 0; i < len(doc); {
		k := strings.Index(doc[i:], line)
		if k < 0 {
			return -1
		}
		at := i + k
		after := at + len(line)
		if (at == 0 || doc[at-1] == '\n') && (after == len(doc) || doc[after] == '\n') {
			return at
		}
		i = at + 1
	}
	return -1
}

// Extract returns the text of block name in doc.
func Extract(doc, name string) (string, error) {
	i, j, err := span(doc, name)
	if err != nil {
		return "", err
	}
	return doc[i:j], nil
}

// Replace returns doc with the text of block name replaced by text
// (given a final newline if it lacks one).
func Replace(doc, name, text string) (string, error) {
	i, j, err := span(doc, name)
	if err != nil {
		return "", err
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return doc[:i] + text + doc[j:], nil
}

// Stale compares every block with its rendering and returns one error
// per block that differs (naming its file, block and first differing
// line) or cannot be rendered or found; nil when all are current.
func Stale(blocks []Block) []error {
	var errs []error
	for _, b := range blocks {
		if b.absent() {
			continue
		}
		have, want, err := b.texts()
		if err == nil && have != want {
			err = fmt.Errorf("stale: %s", firstDiff(have, want))
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", b.where(), err))
		}
	}
	return errs
}

// Update rewrites every block from its rendering.
func Update(blocks []Block) error {
	for _, b := range blocks {
		if b.absent() {
			continue
		}
		doc, err := b.rewritten()
		if err == nil {
			err = os.WriteFile(b.File, []byte(doc), 0o644)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", b.where(), err)
		}
	}
	return nil
}

// Verify is the test of a suite's blocks: with update it rewrites them
// (Update); otherwise it reports each stale block with tb.Error, saying
// to run fix. It also reports any block in the blocks' files, and in the
// files also names (documents the suite's figures may have moved out of),
// whose name starts with prefix but that is not among blocks: a block with
// no renderer would never be checked.
func Verify(tb testing.TB, blocks []Block, prefix string, update bool, fix string, also ...string) {
	tb.Helper()
	if update {
		if err := Update(blocks); err != nil {
			tb.Fatal(err)
		}
		return
	}
	for _, err := range Stale(blocks) {
		tb.Errorf("%v\n(run %s to rewrite it from the results)", err, fix)
	}
	for _, err := range unknown(blocks, prefix, also) {
		tb.Error(err)
	}
}

// unknown reports the blocks named with prefix in the blocks' files and
// in also that have no renderer among blocks.
func unknown(blocks []Block, prefix string, also []string) []error {
	known := map[string]bool{}
	var files []string
	for _, b := range blocks {
		known[b.File+"\x00"+b.Name] = true
		if b.Name != "" {
			files = append(files, b.File)
		}
	}
	var errs []error
	seen := map[string]bool{}
	for _, file := range append(files, also...) {
		if seen[file] {
			continue
		}
		seen[file] = true
		doc, err := os.ReadFile(file)
		if err != nil {
			continue // a block's file: reported by Stale; another: nothing to check
		}
		for _, n := range Names(string(doc)) {
			if strings.HasPrefix(n, prefix) && !known[file+"\x00"+n] {
				errs = append(errs, fmt.Errorf("%s: block %q has no renderer: add one, or remove its markers", file, n))
			}
		}
	}
	return errs
}

// absent reports whether b is optional and its file lacks its markers.
func (b Block) absent() bool {
	if !b.Optional || b.Name == "" {
		return false
	}
	raw, err := os.ReadFile(b.File)
	if err != nil {
		return false
	}
	begin, end := Markers(b.Name)
	return lineIndex(string(raw), begin) < 0 && lineIndex(string(raw), end) < 0
}

func (b Block) where() string {
	if b.Name == "" {
		return b.File
	}
	return b.File + ": block " + b.Name
}

// texts returns the block's current text and its rendering.
func (b Block) texts() (have, want string, err error) {
	raw, err := os.ReadFile(b.File)
	if err != nil {
		return "", "", err
	}
	want, err = b.Render()
	if err != nil {
		return "", "", fmt.Errorf("render: %w", err)
	}
	if b.Name == "" {
		return string(raw), want, nil
	}
	have, err = Extract(string(raw), b.Name)
	if want != "" && !strings.HasSuffix(want, "\n") {
		want += "\n"
	}
	return have, want, err
}

// rewritten is the block's file with the block rendered anew.
func (b Block) rewritten() (string, error) {
	text, err := b.Render()
	if err != nil {
		return "", fmt.Errorf("render: %w", err)
	}
	if b.Name == "" {
		return text, nil
	}
	raw, err := os.ReadFile(b.File)
	if err != nil {
		return "", err
	}
	return Replace(string(raw), b.Name, text)
}

// firstDiff describes the first line where have and want differ.
func firstDiff(have, want string) string {
	h, w := strings.Split(have, "\n"), strings.Split(want, "\n")
	for i := range max(len(h), len(w)) {
		var hl, wl string
		if i < len(h) {
			hl = h[i]
		}
		if i < len(w) {
			wl = w[i]
		}
		if hl != wl {
			return fmt.Sprintf("line %d of the block is\n\t%q\nthe results render\n\t%q", i+1, hl, wl)
		}
	}
	return "they differ"
}
