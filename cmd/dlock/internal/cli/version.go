package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

func newVersionCmd(std *IO) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version and the backends linked into this binary",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			_, err := fmt.Fprintf(std.Out, "dlock %s (%s)\nbackends: %s\n",
				version(), runtime.Version(), strings.Join(dlock.Schemes(), ", "))
			return err
		},
	}
}

// version is the main module's version, or its VCS revision for a
// development build.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range bi.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "devel " + s.Value[:12]
		}
	}
	return "devel"
}
