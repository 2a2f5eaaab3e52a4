package chaos

import (
	"fmt"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestS6MySQLCrash: MariaDB is SIGKILLed right after a grant and
// restarted, in both mysqllock modes. The holder must be told, nobody may
// be granted while it still believes it holds, and the next fence must be
// above the crashed grant's: with innodb_flush_log_at_trx_commit=1 every
// commit is on disk when the client hears of it. The negative control
// runs the same with innodb_flush_log_at_trx_commit=0, where InnoDB
// writes its log about once a second: the grant's commit (lease mode) or
// the fence drawn after GET_LOCK (get_lock mode) is lost with the crash,
// and the fence is handed out again. A kill that lands just after the
// once-a-second write misses it, so the control runs up to
// controlRetries more trials until it reproduces.
func TestS6MySQLCrash(t *testing.T) {
	srv := testserver.NewMariaDB(t)
	for _, mode := range []string{"lease", "get_lock"} {
		for _, async := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/async=%v", mode, async), func(t *testing.T) {
				flushAtCommit(t, srv, 1)
				b := mysqlBackend(t, srv, mode)
				if async {
					// After the schema is safely on disk: only the
					// grants may be lost.
					flushAtCommit(t, srv, 0)
				}
				crash := func() {
					srv.Kill()
					if err := srv.Restart(); err != nil {
						t.Fatal(err)
					}
				}
				s6Case(t, b, crash, s6Labels{"MariaDB", "innodb_flush_log_at_trx_commit=0"}, async)
			})
		}
	}
}

// flushAtCommit sets innodb_flush_log_at_trx_commit on the running srv
// and for its restarts (it is a global setting only).
func flushAtCommit(t *testing.T, srv *testserver.MariaDBServer, v int) {
	t.Helper()
	srv.Extra = []string{fmt.Sprintf("--innodb-flush-log-at-trx-commit=%d", v)}
	if err := srv.Exec(fmt.Sprintf("SET GLOBAL innodb_flush_log_at_trx_commit = %d", v)); err != nil {
		t.Fatal(err)
	}
}
