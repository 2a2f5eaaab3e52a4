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
	if err := explainTimeout(l.Migrate(bctx)); err != nil {
		return err
	}
	_, err = fmt.Fprintln(io.Out, "schema is up to date")
	return err
}
