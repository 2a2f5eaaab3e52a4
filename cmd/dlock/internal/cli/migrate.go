package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/dlockdev/dlock"
	"github.com/spf13/cobra"
)

// migrateOptions configures `dlock migrate`.
type migrateOptions struct {
	URL string
}

func newMigrateCmd(g *globalOptions, std *IO) *cobra.Command {
	opts := &migrateOptions{}
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create the backend's schema (Postgres lease table); idempotent",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.URL = g.URL
			return runMigrate(cmd.Context(), opts, std)
		},
	}
}

func runMigrate(ctx context.Context, opts *migrateOptions, std *IO) error {
	return withLocker(ctx, opts.URL, func(ctx context.Context, l *dlock.Locker) error {
		return migrate(ctx, l, std)
	})
}

// migrate creates what l's schema lacks and says what it did.
func migrate(ctx context.Context, l *dlock.Locker, std *IO) error {
	created, err := l.MigrateReport(ctx)
	if errors.Is(err, dlock.ErrUnsupported) {
		_, err := fmt.Fprintln(std.Out, "this backend has no schema to migrate; nothing to do")
		return err
	}
	if err != nil {
		return err
	}
	return reportMigration(std, created)
}

// reportMigration says what migrate created, or that nothing was needed.
func reportMigration(std *IO, created []string) error {
	if len(created) == 0 {
		_, err := fmt.Fprintln(std.Out, "schema is up to date; nothing created")
		return err
	}
	for _, c := range created {
		if _, err := fmt.Fprintf(std.Out, "created %s\n", c); err != nil {
			return err
		}
	}
	return nil
}
