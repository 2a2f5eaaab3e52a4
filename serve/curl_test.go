package serve_test

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestCurlWalkthrough runs the curl walkthrough of docs/serve.md, as
// written, against a real server, and checks what it prints.
func TestCurlWalkthrough(t *testing.T) {
	testserver.Binary(t, "curl")
	doc, err := os.ReadFile("../docs/serve.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "## A walkthrough with curl")
	m := regexp.MustCompile("(?s)```sh\n(.*?)```").FindStringSubmatch(section)
	if !ok || m == nil {
		t.Fatal("docs/serve.md has no sh block under \"A walkthrough with curl\"")
	}
	e := newEnv(t, fmt.Sprintf("mem://curl-walkthrough-%d", time.Now().UnixNano()), nil) // fences from 1, also under -count
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", m[1])
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), "DLOCK_SERVE="+e.url, "TOKEN="+clientTok, "ADMIN_TOKEN="+adminTok)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the walkthrough failed: %v\n%s", err, out)
	}
	for _, want := range []string{`"fence":1,`, "fence 1\n", "second client: 409\n", `"new_fence":`,
		"event: held\nevent: lost\n", `"reason":"force-released"`, "\n410\n"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, out)
		}
	}
}
