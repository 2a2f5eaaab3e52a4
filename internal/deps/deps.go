// Package deps pins the project's third-party modules in go.mod while the
// driver packages that use them are being written. It is removed once every
// dependency is imported by real code.
package deps

import (
	_ "github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/redis/go-redis/v9"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/client/v3/concurrency"
	_ "go.uber.org/goleak"
	_ "modernc.org/sqlite"
)
