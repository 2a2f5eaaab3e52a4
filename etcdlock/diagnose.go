package etcdlock

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/dlockdev/dlock/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// diagnoseTimeout bounds each endpoint's status request in Diagnose.
const diagnoseTimeout = 2 * time.Second

// Diagnose checks the deployment (`dlock doctor`): each endpoint's health
// and status (reached or not, version, leader, alarms), whether the
// members agree on a leader, the cluster's size, and the minimum TTL the
// driver enforces for its assumed election timeout. It only reads. err is
// returned when no endpoint answers.
func (d *etcdDriver) Diagnose(ctx context.Context) ([]driver.Finding, error) {
	eps := d.cli.Endpoints()
	sts := d.statuses(ctx, eps)
	var fs []driver.Finding
	reached := 0
	for i, ep := range eps {
		f := endpointFinding(ep, sts[i])
		if f.Verdict == driver.VerdictOK {
			reached++
		}
		fs = append(fs, f)
	}
	if reached == 0 {
		return fs, fmt.Errorf("no etcd endpoint answered (%s)", strings.Join(eps, ", "))
	}
	fs = append(fs, leaderFinding(eps, sts), d.membersFinding(ctx), d.ttlFinding())
	return fs, nil
}

type memberStatus struct {
	resp *clientv3.StatusResponse
	err  error
}

// statuses asks every endpoint for its status at once.
func (d *etcdDriver) statuses(ctx context.Context, eps []string) []memberStatus {
	out := make([]memberStatus, len(eps))
	var wg sync.WaitGroup
	for i, ep := range eps {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
			defer cancel()
			out[i].resp, out[i].err = d.cli.Status(ctx, ep)
			if out[i].err != nil {
				out[i].err = fmt.Errorf("%s", describe(ctx, whyNot(ctx, ep, out[i].err), diagnoseTimeout, ""))
			}
		})
	}
	wg.Wait()
	return out
}

func endpointFinding(ep string, st memberStatus) driver.Finding {
	f := driver.Finding{Check: "etcd endpoint " + ep}
	if st.err != nil {
		f.Verdict = driver.VerdictWarn
		f.Detail = fmt.Sprintf("not reached: %v", st.err)
		f.Fix = "check that the member runs and is reachable from here; locks keep working while a quorum of members is reachable"
		return f
	}
	r := st.resp
	f.Detail = fmt.Sprintf("reached: etcd %s, member %x, leader %x, raft term %d, db %d bytes", r.Version, r.Header.MemberId, r.Leader, r.RaftTerm, r.DbSize)
	switch {
	case len(r.Errors) > 0:
		f.Verdict = driver.VerdictWarn
		f.Detail += "; errors: " + strings.Join(r.Errors, "; ")
		f.Fix = "clear the member's alarms (etcdctl alarm list / disarm after compaction and defragmentation): writes, and so grants and releases, fail meanwhile"
	case r.Leader == 0:
		f.Verdict = driver.VerdictWarn
		f.Detail += " (no leader)"
		f.Fix = "the member has no leader: grants and refreshes fail until a quorum of members is up"
	default:
		f.Verdict = driver.VerdictOK
	}
	return f
}

// leaderFinding checks that the members reached agree on one leader.
func leaderFinding(eps []string, sts []memberStatus) driver.Finding {
	f := driver.Finding{Check: "etcd leader"}
	leaders := map[uint64][]string{}
	for i, st := range sts {
		if st.err == nil {
			leaders[st.resp.Leader] = append(leaders[st.resp.Leader], eps[i])
		}
	}
	_, none := leaders[0]
	switch {
	case none || len(leaders) == 0:
		f.Verdict = driver.VerdictWarn
		f.Detail = "no leader seen by " + strings.Join(leaders[0], ", ")
		f.Fix = "bring a quorum of members back: without a leader no lock can be granted, refreshed or released, and holders lose their leases"
	case len(leaders) > 1:
		f.Verdict = driver.VerdictWarn
		f.Detail = fmt.Sprintf("members report %d different leaders (an election in progress, or endpoints of different clusters)", len(leaders))
		f.Fix = "run the check again; if it persists, make sure the URL lists members of one cluster only"
	default:
		for id := range leaders {
			f.Detail = fmt.Sprintf("leader %x, agreed by every member reached", id)
		}
		f.Verdict = driver.VerdictOK
	}
	return f
}

// membersFinding reports the cluster's size: one member is a single point
// of failure for availability (not for safety: etcd syncs its log).
func (d *etcdDriver) membersFinding(ctx context.Context) driver.Finding {
	f := driver.Finding{Check: "etcd cluster size"}
	ctx, cancel := context.WithTimeout(ctx, diagnoseTimeout)
	defer cancel()
	resp, err := d.cli.MemberList(ctx)
	if err != nil {
		f.Verdict, f.Detail = driver.VerdictWarn, "member list not read: "+err.Error()
		return f
	}
	n := len(resp.Members)
	f.Detail = fmt.Sprintf("%d members", n)
	if n == 1 {
		f.Detail = "1 member"
	}
	switch {
	case n == 1:
		f.Verdict = driver.VerdictWarn
		f.Fix = "a single member is safe but a single point of failure: while it is down no lock can be granted and holders lose their leases; run 3 or 5 members"
	case n%2 == 0:
		f.Verdict = driver.VerdictWarn
		f.Fix = fmt.Sprintf("an even number of members tolerates no more failures than %d: use an odd number", n-1)
	default:
		f.Verdict = driver.VerdictOK
	}
	return f
}

// ttlFinding states the election timeout the driver assumes and the
// minimum TTL that follows (MinTTLFor): etcd does not report a member's
// --election-timeout over the client API.
func (d *etcdDriver) ttlFinding() driver.Finding {
	return driver.Finding{
		Check:   "etcd TTL vs election timeout",
		Verdict: driver.VerdictOK,
		Detail: fmt.Sprintf("assuming --election-timeout %s: TTLs of at least %s (8 election timeouts) keep a lock through a leader election; shorter ones are refused",
			d.election, d.minTTL),
		Fix: "if the cluster's --election-timeout is not " + d.election.String() + ", say so with the URL's election_timeout (or Config.ElectionTimeout)",
	}
}

var _ driver.Diagnoser = (*etcdDriver)(nil)

// whyNot finds the cause of a failed request to ep when the client only
// said that the deadline passed: a TCP connection attempt tells "connection
// refused" from a member that accepts connections but does not answer.
func whyNot(ctx context.Context, ep string, err error) error {
	if !isCtxErr(err) {
		return err
	}
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), diagnoseTimeout/4)
	defer cancel()
	conn, derr := (&net.Dialer{}).DialContext(dctx, "tcp", ep)
	if derr != nil {
		return derr
	}
	_ = conn.Close()
	return err
}
