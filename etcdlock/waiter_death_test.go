package etcdlock_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/etcdlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// envWaiterChild makes the test binary play a queued waiter:
// "ENDPOINT ELECTION-TIMEOUT NAME TTL WAIT".
const envWaiterChild = "DLOCK_ETCDLOCK_WAITER_CHILD"

// waiterChild waits for NAME on the etcd at ENDPOINT, prints "granted
// FENCE" once it holds it, and releases it when its stdin closes. WAIT is
// a duration or "forever".
func waiterChild(spec string) error {
	f := strings.Fields(spec)
	if len(f) != 5 {
		return fmt.Errorf("%s=%q: want ENDPOINT ELECTION-TIMEOUT NAME TTL WAIT", envWaiterChild, spec)
	}
	durs := make([]time.Duration, 3)
	for i, s := range []string{f[1], f[3], f[4]} {
		if s == "forever" {
			durs[i] = dlock.Forever
			continue
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		durs[i] = d
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{f[0]}, DialTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	l, err := etcdlock.Config{ElectionTimeout: durs[0]}.Locker(cli)
	if err != nil {
		return err
	}
	defer l.Close()
	ctx := context.Background()
	ls, err := l.Acquire(ctx, f[2], dlock.WithTTL(durs[1]), dlock.WithWait(durs[2]))
	if err != nil {
		return err
	}
	fmt.Println("granted", ls.Fence())
	_, _ = io.Copy(io.Discard, os.Stdin)
	return ls.Release(ctx)
}

// startWaiterChild starts a waiter child (waiterChild) for name, assuming
// the election timeout election, with wait its wait ("forever" for none),
// and returns it with a channel that receives its fence when it is
// granted. It is resumed and killed at the end of the test if still
// running.
func startWaiterChild(t *testing.T, srv *testserver.EtcdServer, election time.Duration, name string, ttl time.Duration, wait string) (*exec.Cmd, <-chan string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	spec := strings.Join([]string{srv.Endpoint, election.String(), name, ttl.String(), wait}, " ")
	cmd.Env = append(os.Environ(), envWaiterChild+"="+spec)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdin, err := cmd.StdinPipe() // held open: the child holds until it closes
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	granted := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f, ok := strings.CutPrefix(sc.Text(), "granted "); ok {
				granted <- f
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(syscall.SIGCONT)
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd, granted
}

// TestDeadWaiterDoesNotStallTheQueue: A holds a name with a 30 s TTL; B
// (a separate process) and then C queue for it; B is SIGKILLed while
// queued, and A releases at once, while B's key is still in the queue. The
// lock must reach C long before a TTL has passed: a dead waiter's place
// lapses within the wait lease (2 s on the test server), not with the
// lock's TTL. C's grant must ride on the lease of its own TTL (at once
// with a wait bound, after its first refresh without: see
// TestHandOffMovesAtFirstRefresh), with a fence above A's. With and
// without a wait bound for B and C (a bounded waiter's key says when its
// wait ends, which does not help here: that is a minute away; and it
// becomes the holder by a claim). The measured delay is logged.
func TestDeadWaiterDoesNotStallTheQueue(t *testing.T) {
	const ttl = 30 * time.Second
	for _, wait := range []string{"forever", "1m0s"} {
		t.Run("wait="+wait, func(t *testing.T) {
			cwait := time.Minute
			if wait == "forever" {
				cwait = dlock.Forever
			}
			srv := testserver.Etcd(t)
			admin := client(t, srv.Endpoint)
			ctx := context.Background()
			name := "death/" + wait
			held, err := locker(t, srv.Endpoint).Acquire(ctx, name, dlock.WithTTL(ttl))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := startWaiterChild(t, srv, srv.ElectionTimeout, name, ttl, wait)
			queued(t, admin, name, 2)
			got := make(chan grant, 1)
			c := locker(t, srv.Endpoint)
			cctx, cancel := context.WithCancel(ctx)
			go func() {
				ls, err := c.Acquire(cctx, name, dlock.WithTTL(ttl), dlock.WithWait(cwait))
				got <- grant{3, ls, err}
			}()
			defer func() { // C's wait ends before its Locker closes
				cancel()
				if g := <-got; g.ls != nil {
					_ = g.ls.Release(ctx)
				}
			}()
			queued(t, admin, name, 3)

			if err := b.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = b.Wait()
			if n := count(t, admin, name); n != 3 {
				t.Fatalf("%d contenders right after B died, want 3: B's place must still be in the queue at the release", n)
			}
			released := time.Now()
			if err := held.Release(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case g := <-got:
				got <- g // for the deferred release
				if g.err != nil {
					t.Fatalf("C: %v", g.err)
				}
				t.Logf("C granted %s after A released (TTL %s, B killed right before)", time.Since(released).Round(time.Millisecond), ttl)
				if g.ls.Fence() <= held.Fence() {
					t.Errorf("C's fence %d is not above A's %d", g.ls.Fence(), held.Fence())
				}
				// A waiter without a deadline is granted on the wait lease,
				// and its first refresh moves the key.
				moveBy := time.Now().Add(etcdlock.MinTTLFor(srv.ElectionTimeout))
				for granted := leaseTTL(t, admin, name); granted != ttl; granted = leaseTTL(t, admin, name) {
					if wait != "forever" || time.Now().After(moveBy) {
						t.Fatalf("C's key rides on a lease of %s, want its TTL %s", granted, ttl)
					}
					time.Sleep(20 * time.Millisecond)
				}
			case <-time.After(ttl / 4):
				key, lease := head(t, admin, name)
				left, _ := admin.TimeToLive(ctx, lease)
				t.Fatalf("C not granted %s after A released (TTL %s); %s holds the queue, its lease ends in %d s: the dead waiter B kept its place",
					ttl/4, ttl, key, left.TTL)
			}
		})
	}
}

// TestWaiterThatLostItsPlaceQueuesAgain: a live waiter whose key ends
// (its wait lease lapsed, as when the waiter is cut off from the cluster
// for longer than that lease: here the lease is revoked) notices it at its
// next renewal and queues again at the back, while the holder still
// holds, rather than waiting on a key that no longer exists. It has lost
// its place: W2, queued after it, is granted first, then W1.
func TestWaiterThatLostItsPlaceQueuesAgain(t *testing.T) {
	const ttl = 10 * time.Second
	srv := testserver.Etcd(t)
	admin := client(t, srv.Endpoint)
	ctx := context.Background()
	name := "lost-place/" + t.Name()
	held, err := locker(t, srv.Endpoint).Acquire(ctx, name, dlock.WithTTL(ttl))
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan grant, 2)
	for who := 1; who <= 2; who++ {
		startWaiter(ctx, t, srv.Endpoint, name, ttl, who, got)
		queued(t, admin, name, int64(who+1))
	}
	w1 := contenders(t, admin, name)[1]
	if _, err := admin.Revoke(ctx, clientv3.LeaseID(w1.Lease)); err != nil {
		t.Fatal(err)
	}
	queued(t, admin, name, 3) // W1 is back
	last := contenders(t, admin, name)[2]
	if string(last.Key) == string(w1.Key) && last.CreateRevision == w1.CreateRevision {
		t.Fatalf("W1's key %s is still the one its lease carried", w1.Key)
	}
	if err := held.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{2, 1} {
		select {
		case g := <-got:
			if g.err != nil || g.who != want {
				t.Fatalf("granted to W%d (err %v), want W%d", g.who, g.err, want)
			}
			if err := g.ls.Release(ctx); err != nil {
				t.Fatal(err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("W%d not granted within 30 s", want)
		}
	}
}

// count is the number of contender keys (holder and waiters) of name.
func count(t *testing.T, cli *clientv3.Client, name string) int {
	t.Helper()
	return len(contenders(t, cli, name))
}

// contenders returns name's contender keys, oldest first.
func contenders(t *testing.T, cli *clientv3.Client, name string) []*mvccpb.KeyValue {
	t.Helper()
	resp, err := cli.Get(context.Background(), etcdlock.DefaultPrefix+url.PathEscape(name)+"/", clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Kvs
}

// leaseTTL is the granted TTL of the lease under which name's holder key
// lives.
func leaseTTL(t *testing.T, cli *clientv3.Client, name string) time.Duration {
	t.Helper()
	_, lease := head(t, cli, name)
	resp, err := cli.TimeToLive(context.Background(), lease)
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(resp.GrantedTTL) * time.Second
}
