package zklock

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/dlockdev/dlock/driver"
	"github.com/go-zookeeper/zk"
)

// Diagnose checks the deployment (`dlock doctor`): the ensemble's size,
// read from /zookeeper/config, and who may delete lock nodes, from the
// root's ACL. It only reads.
func (d *zkDriver) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	ensemble, err := d.checkEnsemble(ctx)
	if err != nil {
		return nil, err
	}
	return []driver.Finding{ensemble, d.checkACL(ctx)}, nil
}

// checkEnsemble counts the voting servers in /zookeeper/config (empty on
// a standalone server).
func (d *zkDriver) checkEnsemble(ctx context.Context) (driver.Finding, error) {
	f := driver.Finding{Check: "zookeeper ensemble"}
	data, err := bounded(ctx, func() ([]byte, error) {
		data, _, err := d.conn.Get("/zookeeper/config")
		return data, err
	})
	if err != nil && !errors.Is(err, zk.ErrNoNode) && !errors.Is(err, zk.ErrNoAuth) {
		return f, err
	}
	voters := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, "server.") && !strings.Contains(line, ":observer") {
			voters++
		}
	}
	f.Detail = fmt.Sprintf("%d voting servers in /zookeeper/config", voters)
	switch {
	case err != nil:
		f.Verdict, f.Detail = driver.VerdictWarn, "cannot read /zookeeper/config: "+err.Error()
	case voters <= 1:
		f.Verdict, f.Detail = driver.VerdictWarn, "standalone server: no failover"
		f.Fix = "run an ensemble of 3 or 5 servers: a lone server's crash stops every lock until it is back, and a restart longer than the session timeout ends every lease"
	case voters%2 == 0:
		f.Verdict = driver.VerdictWarn
		f.Fix = "use an odd number of servers: an even ensemble tolerates no more failures than one server fewer"
	default:
		f.Verdict = driver.VerdictOK
	}
	return f, nil
}

// checkACL warns when anyone may delete the lock nodes under the root.
func (d *zkDriver) checkACL(ctx context.Context) driver.Finding {
	f := driver.Finding{Check: "zookeeper root ACL"}
	type got struct{ acl []zk.ACL }
	g, err := bounded(ctx, func() (got, error) {
		acl, _, err := d.conn.GetACL(d.root)
		return got{acl}, err
	})
	if err != nil {
		f.Verdict, f.Detail = driver.VerdictWarn, fmt.Sprintf("cannot read the ACL of %s: %v", d.root, err)
		return f
	}
	var parts []string
	open := false
	for _, a := range g.acl {
		parts = append(parts, fmt.Sprintf("%s:%s perms=%#x", a.Scheme, a.ID, a.Perms))
		open = open || (a.Scheme == "world" && a.Perms&(zk.PermDelete|zk.PermCreate) != 0)
	}
	f.Detail = d.root + ": " + strings.Join(parts, ", ")
	f.Verdict = driver.VerdictOK
	if open {
		f.Verdict = driver.VerdictWarn
		f.Fix = "any client can create and delete lock nodes (and so break locks); give credentials in the URL (zk://user:password@...) and protect the root with an ACL"
	}
	return f
}
