package cli

import (
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// valueName is a back-quoted word in a flag's usage that names the
// flag's value on purpose, as pflag documents: an upper-case placeholder
// such as `CIDR` or `FILE`.
var valueName = regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)

// TestFlagUsagesQuoteNoCommand: pflag takes the first back-quoted word of
// a usage string as the flag's value name, so "SIGKILL a `dlock elect`
// leader" renders as "--election dlock elect", a bool that seems to take
// a value. Every flag of every command either has no back-quote pair in
// its usage or back-quotes an upper-case placeholder.
func TestFlagUsagesQuoteNoCommand(t *testing.T) {
	tio, _, _ := testIO()
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		check := func(f *pflag.Flag) {
			seen++
			name, _ := pflag.UnquoteUsage(f)
			if strings.Count(f.Usage, "`") >= 2 && !valueName.MatchString(name) {
				t.Errorf("%s --%s: usage %q back-quotes %q, which --help shows as the value: \"--%s %s\"",
					c.CommandPath(), f.Name, f.Usage, name, f.Name, name)
			}
		}
		c.LocalFlags().VisitAll(check)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd(tio))
	if seen < 50 {
		t.Errorf("walked %d flags: fewer than the commands define", seen)
	}
}

// TestBenchHelpShowsElectionAsSwitch: `dlock bench --help` shows
// --election as a switch, with no value after it.
func TestBenchHelpShowsElectionAsSwitch(t *testing.T) {
	tio, out, _ := testIO()
	if code := Execute(t.Context(), []string{"bench", "--help"}, tio); code != ExitOK {
		t.Fatalf("bench --help: exit %d", code)
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if f := strings.Fields(line); strings.HasPrefix(line, " ") && len(f) > 1 && f[0] == "--election" && f[1] != "measure" {
			t.Errorf("bench --help: %q, want --election followed by its description", line)
		}
	}
}
