package wireprobe_test

import (
	"fmt"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/dlockdev/dlock/internal/wireprobe"
)

// TestProbes: each probe recognises its own server and not the other, nor
// a closed port.
func TestProbes(t *testing.T) {
	rd := testserver.Redis(t)
	pg := testserver.Postgres(t)
	pgAddr := fmt.Sprintf("127.0.0.1:%d", pg.Port)
	closed := fmt.Sprintf("127.0.0.1:%d", testserver.FreePort(t))
	for _, c := range []struct {
		name         string
		addr         string
		redis, postg bool
	}{{"redis", rd.Addr, true, false}, {"postgres", pgAddr, false, true}, {"closed", closed, false, false}} {
		if got := wireprobe.IsRedis(wireprobe.Ping("tcp", c.addr)); got != c.redis {
			t.Errorf("%s: IsRedis(Ping()) = %v", c.name, got)
		}
		if got := wireprobe.Postgres("tcp", c.addr); got != c.postg {
			t.Errorf("%s: Postgres() = %v", c.name, got)
		}
		if got := wireprobe.Ping("tcp", c.addr); !c.redis && got != nil {
			t.Errorf("%s answered a PING: %q", c.name, got)
		}
	}
}
