package cli

import (
	"context"
	"fmt"

	"github.com/dlockdev/dlock/driver"
	"github.com/spf13/cobra"
)

// migrateOptions configures `dlock migrate`.
type migrateOptions struct {
	URL string
}

func newMigrateCmd(g *globalOptions, io *IO) *cobra.Command {
	opts := &migrateOptions{}
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create the backend's schema (Postgres lease table); idempotent",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.URL = g.URL
			return runMigrate(cmd.Context(), opts, io)
		},
	}
}

func runMigrate(ctx context.Context, opts *migrateOptions, io *IO) error {
	l, err := openLocker(ctx, opts.URL)
	if err != nil {
		return err
	}
	defer l.Close()
	if _, ok := l.Driver().(driver.Migrator); !ok {
		_, err = fmt.Fprintln(io.Out, "this backend has no schema to migrate; nothing to do")
		return err
	}
	bctx, cancel := withBackendTimeout(ctx)
	defer cancel()
	mr, ok := l.Driver().(driver.MigrationReporter)
	if !ok {
		if err := explainTimeout(l.Migrate(bctx)); err != nil {
			return err
		}
		_, err = fmt.Fprintln(io.Out, "schema is in place (created where missing)")
		return err
	}
	created, err := mr.MigrateReport(bctx)
	if err := explainTimeout(err); err != nil {
		return fmt.Errorf("dlock: migrate: %w", err)
	}
	return reportMigration(io, created)
}

// reportMigration says what migrate created, or that nothing was needed.
func reportMigration(io *IO, created []string) error {
	if len(created) == 0 {
		_, err := fmt.Fprintln(io.Out, "schema is up to date; nothing created")
		return err
	}
	for _, c := range created {
		if _, err := fmt.Fprintf(io.Out, "created %s\n", c); err != nil {
			return err
		}
	}
	return nil
}
