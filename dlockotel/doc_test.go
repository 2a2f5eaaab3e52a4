package dlockotel

import (
	"bytes"
	"go/ast"
	"go/format"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocMatchesExample: the program in docs/otel.md (which the root
// module's snippet test cannot build: it needs this module's
// dependencies) is Example's code, imports and body alike, so that go
// test's run of Example vouches for the doc.
func TestDocMatchesExample(t *testing.T) {
	doc, err := os.ReadFile("../docs/otel.md")
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(doc), "\n```golang\n")
	block, _, closed := strings.Cut(block, "\n```\n")
	if !ok || !closed {
		t.Fatal("docs/otel.md has no complete ```golang block")
	}
	docImports, docBody := funcCode(t, "docs/otel.md", []byte(block), "main")
	src, err := os.ReadFile("example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	exImports, exBody := funcCode(t, "example_test.go", src, "Example")
	if !slices.Equal(docImports, exImports) {
		t.Errorf("imports differ:\ndocs/otel.md:    %v\nexample_test.go: %v", docImports, exImports)
	}
	if docBody != exBody {
		t.Errorf("docs/otel.md's main differs from Example:\n--- docs/otel.md\n%s\n--- example_test.go\n%s", docBody, exBody)
	}
}

// funcCode parses a Go file and returns its imports and the formatted
// body of function name, without Example's // Output: comment.
func funcCode(t *testing.T, file string, src []byte, name string) (imports []string, body string) {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range f.Imports {
		imports = append(imports, imp.Path.Value)
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == name {
			start, end := fset.Position(fn.Body.Lbrace).Offset, fset.Position(fn.Body.Rbrace).Offset
			code, _, _ := strings.Cut(string(src[start+1:end]), "\t// Output:")
			out, err := format.Source(bytes.TrimSpace([]byte(code)))
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			return imports, string(out)
		}
	}
	t.Fatalf("%s: no func %s", file, name)
	return nil, ""
}
