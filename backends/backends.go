// Package backends links every dlock driver into a program, so that
// dlock.Open accepts every URL scheme:
//
//	import _ "github.com/dlockdev/dlock/backends"
//
// A program that needs only one backend imports that driver package
// instead and stays smaller (the etcd client in particular is large).
package backends

import (
	// Each driver registers its URL schemes with dlock.Register in init.
	_ "github.com/dlockdev/dlock/etcdlock"  // etcd://
	_ "github.com/dlockdev/dlock/filelock"  // file:// (the embedded default)
	_ "github.com/dlockdev/dlock/memlock"   // mem://
	_ "github.com/dlockdev/dlock/mysqllock" // mysql://, mariadb://
	_ "github.com/dlockdev/dlock/pglock"    // postgres://, postgresql://
	_ "github.com/dlockdev/dlock/redislock" // redis://, rediss://
	_ "github.com/dlockdev/dlock/redlock"   // redlock://
	_ "github.com/dlockdev/dlock/zklock"    // zk://
)
