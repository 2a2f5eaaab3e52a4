package dlock_test

import (
	"os/exec"
	"strings"
	"testing"
)

// module is this module's import path.
const module = "github.com/dlockdev/dlock"

// layoutRules are the import rules of docs/layout.md: a package whose path
// starts with from (after the module path) must not import one whose path
// starts with to. An empty from or to is the root package alone.
var layoutRules = []struct{ from, to, why string }{
	{"", "<driver>", "the portable layer knows no backend"},
	{"driver", "", "the driver contract is the ground: it imports nothing of dlock"},
	{"internal/", "<driver>", "internal/ sits below the drivers"},
	{"internal/", "serve", "internal/ sits below the service"},
	{"<driver>", "cmd/", "a driver knows no command"},
	{"<driver>", "serve", "a driver knows no service"},
	{"serve", "cmd/", "the service is a library the command uses"},
	{"<shipped>", "internal/testing/", "shipped code never imports test support"},
}

// drivers are the backends' packages.
var drivers = []string{"redislock", "redlock", "pglock", "mysqllock", "etcdlock", "zklock", "filelock", "memlock"}

// TestLayout: the non-test imports of every package of the module keep the
// rules of docs/layout.md, so that imports run one way: cmd, then the
// service and the drivers, then the library and internal/, then the driver
// contract.
func TestLayout(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[rel(f[0])] = nil
		for _, imp := range f[1:] {
			if imp == module || strings.HasPrefix(imp, module+"/") {
				imports[rel(f[0])] = append(imports[rel(f[0])], rel(imp))
			}
		}
	}
	if len(imports) < 30 {
		t.Fatalf("go list named %d packages; want the whole module", len(imports))
	}
	for pkg, imps := range imports {
		for _, imp := range imps {
			for _, r := range layoutRules {
				if in(pkg, r.from) && in(imp, r.to) {
					t.Errorf("%s imports %s: %s", show(pkg), show(imp), r.why)
				}
			}
		}
	}
}

// TestLayoutCatchesViolations: the rules refuse the imports they name.
func TestLayoutCatchesViolations(t *testing.T) {
	for _, c := range [][2]string{{"", "redislock"}, {"driver", ""}, {"internal/rediscore", "redlock"}, {"pglock", "cmd/dlock/internal/cli"}, {"serve", "internal/testing/testserver"}} {
		broken := false
		for _, r := range layoutRules {
			broken = broken || in(c[0], r.from) && in(c[1], r.to)
		}
		if !broken {
			t.Errorf("%s importing %s keeps every rule; want it refused", show(c[0]), show(c[1]))
		}
	}
}

// rel is path relative to the module ("" for the root package).
func rel(path string) string {
	return strings.TrimPrefix(strings.TrimPrefix(path, module), "/")
}

// in reports whether pkg is in the group a rule names.
func in(pkg, group string) bool {
	switch group {
	case "":
		return pkg == ""
	case "<driver>":
		for _, d := range drivers {
			if pkg == d || strings.HasPrefix(pkg, d+"/") {
				return true
			}
		}
		return false
	case "<shipped>":
		return !strings.HasPrefix(pkg, "internal/testing/") && !strings.HasPrefix(pkg, "examples/")
	}
	return pkg == strings.TrimSuffix(group, "/") || strings.HasPrefix(pkg, group)
}

func show(pkg string) string {
	if pkg == "" {
		return "dlock (root)"
	}
	return pkg
}
