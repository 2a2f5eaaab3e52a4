package cli

import (
	"fmt"
	"strings"

	"github.com/dlockdev/dlock/internal/suggest"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagError is the root's flag error function: every flag error is a
// usage error, and an unknown flag gets the nearest flag the command
// takes (cobra suggests commands, not flags) and the command's help.
func flagError(cmd *cobra.Command, err error) error {
	name, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return exitWith(ExitUsage, err)
	}
	hint := fmt.Sprintf("see %s --help", cmd.CommandPath())
	if near, ok := suggest.Closest(name, flagNames(cmd)); ok {
		hint = fmt.Sprintf("did you mean --%s? (%s)", near, hint)
	}
	return usageErr("%v; %s", err, hint)
}

// flagNames lists the long flags cmd takes, its inherited ones included.
func flagNames(cmd *cobra.Command) []string {
	var names []string
	add := func(f *pflag.Flag) {
		if !f.Hidden {
			names = append(names, f.Name)
		}
	}
	cmd.LocalFlags().VisitAll(add)
	cmd.InheritedFlags().VisitAll(add)
	return names
}
