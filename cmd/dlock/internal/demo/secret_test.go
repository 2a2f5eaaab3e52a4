package demo

import (
	"io"
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDemoWorkerURLNotOnCommandLine: a demo worker gets the backend URL,
// which may hold a password, through its environment, never its argv
// (readable by every user with ps).
func TestDemoWorkerURLNotOnCommandLine(t *testing.T) {
	t.Setenv("DLOCK_URL", "redis://:other@127.0.0.1:2/0")
	e := &env{opts: &Options{}, out: io.Discard, errOut: io.Discard, exe: "/bin/true",
		url: "redis://:s3cret@127.0.0.1:1/0", dir: t.TempDir()}
	p, err := e.spawn("w", "A", "noop")
	if err != nil {
		t.Fatal(err)
	}
	<-p.done
	if strings.Contains(strings.Join(p.cmd.Args, " "), "s3cret") {
		t.Errorf("worker argv carries the password: %q", p.cmd.Args)
	}
	if !slices.Contains(p.cmd.Env, urlEnv+"="+e.url) {
		t.Errorf("worker environment lacks %s", urlEnv)
	}
	if slices.Contains(p.cmd.Env, "DLOCK_URL="+os.Getenv("DLOCK_URL")) {
		t.Errorf("worker environment carries the caller's DLOCK_URL")
	}
}
