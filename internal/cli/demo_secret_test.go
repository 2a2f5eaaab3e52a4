package cli

import (
	"io"
	"slices"
	"strings"
	"testing"
)

// TestDemoWorkerURLNotOnCommandLine: a demo worker gets the backend URL,
// which may hold a password, through its environment, never its argv
// (readable by every user with ps).
func TestDemoWorkerURLNotOnCommandLine(t *testing.T) {
	e := &demoEnv{opts: &demoOptions{}, io: &IO{Out: io.Discard, Err: io.Discard}, exe: "/bin/true",
		url: "redis://:s3cret@127.0.0.1:1/0", dir: t.TempDir()}
	p, err := e.spawn("w", "A", "noop")
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if strings.Contains(strings.Join(p.cmd.Args, " "), "s3cret") {
		t.Errorf("worker argv carries the password: %q", p.cmd.Args)
	}
	if !slices.Contains(p.cmd.Env, demoURLEnv+"="+e.url) {
		t.Errorf("worker environment lacks %s", demoURLEnv)
	}
}
