// Command dlock runs commands under a distributed lock, inspects and
// force-releases locks, benchmarks a backend, and demonstrates the failure
// modes of distributed locking live. See `dlock --help`.
package main

import (
	"os"

	// Every driver: etcd://, file:// (the embedded default), mem://,
	// postgres://, redis://, rediss://, redlock://, zk://.
	_ "github.com/dlockdev/dlock/backends"
	"github.com/dlockdev/dlock/cmd/dlock/internal/cli"
)

func main() { os.Exit(cli.Main()) }
