package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
)

// openMem opens url from the test process, closed in cleanup.
func openMem(t *testing.T, url string) *dlock.Locker {
	t.Helper()
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// semaphore returns the semaphore name of n permits on l.
func semaphore(t *testing.T, l *dlock.Locker, name string, n int) *dlock.Semaphore {
	t.Helper()
	sem, err := l.Semaphore(name, n, dlock.WithTTL(time.Minute), dlock.WithOwner("permit-holder"))
	if err != nil {
		t.Fatal(err)
	}
	return sem
}

func TestRunPermitsGivesTheChildItsPermit(t *testing.T) {
	envFile := filepath.Join(t.TempDir(), "env")
	for _, permits := range []int{0, 3} {
		opts := runOpts(memURL(t), "sh", "-c", "env > "+envFile)
		opts.Permits = permits
		std, _, _ := testIO()
		if err := runRun(context.Background(), opts, std); err != nil {
			t.Fatal(err)
		}
		env := readFile(t, envFile)
		got := regexp.MustCompile(`(?m)^DLOCK_PERMIT=(.*)$`).FindStringSubmatch(env)
		switch {
		case permits == 0 && got != nil:
			t.Errorf("a plain run sets %s", got[0])
		case permits > 0 && (got == nil || !regexp.MustCompile(`^[0-2]$`).MatchString(got[1])):
			t.Errorf("--permits %d: DLOCK_PERMIT %v, want 0 to 2", permits, got)
		}
		if !strings.Contains(env, "DLOCK_NAME=job\n") {
			t.Errorf("--permits %d: DLOCK_NAME is not the semaphore's name", permits)
		}
	}
}

func TestRunPermitsRejectsBadCounts(t *testing.T) {
	for _, n := range []string{"0", "-1", "1025", "two"} {
		std, _, errb := testIO()
		code := Execute(context.Background(), []string{"run", "--url", memURL(t), "--permits", n, "job", "--", "true"}, std)
		if code != ExitUsage || !strings.Contains(errb.String(), strconv.Quote(n)) {
			t.Errorf("--permits %s: exit %d, stderr %q; want %d naming the value", n, code, errb, ExitUsage)
		}
	}
}

func TestRunPermitsConflictSaysAllPermitsAreHeld(t *testing.T) {
	url := memURL(t)
	sem := semaphore(t, openMem(t, url), "job", 1)
	if _, err := sem.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	std, out, _ := testIO()
	opts := runOpts(url, "echo", "ran")
	opts.Permits = 1
	err := runRun(context.Background(), opts, std)
	if codeOf(err) != ExitHeld || !strings.Contains(errorLine(err), `all 1 permits of "job" are held, one by permit-holder`) {
		t.Errorf("exit %d, %q", codeOf(err), errorLine(err))
	}
	if out.Len() != 0 {
		t.Errorf("the command ran: %q", out)
	}
}

func electOpts(url string, cmd ...string) *electOptions {
	o := &electOptions{runOptions: *runOpts(url, cmd...)}
	o.TTL, o.Grace = 600*time.Millisecond, 500*time.Millisecond
	return o
}

// TestElectResignsWithTheCommandsStatus: a command that exits by itself
// ends dlock elect with its status, and the term is resigned, not left to
// expire.
func TestElectResignsWithTheCommandsStatus(t *testing.T) {
	url := memURL(t)
	dir := t.TempDir()
	opts := electOpts(url, "sh", "-c", `echo "$DLOCK_TERM $DLOCK_FENCE $$" > `+dir+`/a; exit 7`)
	opts.TTL = time.Minute
	std, _, errb := testIO()
	if err := runElect(context.Background(), opts, std); codeOf(err) != 7 {
		t.Fatalf("exit %d (%v), want 7; stderr %s", codeOf(err), err, errb)
	}
	termOf(t, dir, "a") // DLOCK_TERM and DLOCK_FENCE set and equal
	e, err := openMem(t, url).Election("job")
	if err != nil {
		t.Fatal(err)
	}
	if h, ok, err := e.Leader(context.Background()); ok || err != nil {
		t.Errorf("after the command exited the leader is %v (%v), want none", h, err)
	}
}

// TestElectCampaignsAgainAfterLoss: when the term is force-released, the
// command is stopped and dlock campaigns again, and runs the command again
// under a higher term.
func TestElectCampaignsAgainAfterLoss(t *testing.T) {
	url := memURL(t)
	log := filepath.Join(t.TempDir(), "terms")
	opts := electOpts(url, "sh", "-c", `echo $DLOCK_TERM >> `+log+`; [ $(wc -l < `+log+`) -ge 2 ] && exit 5; exec sleep 30`)
	e, err := openMem(t, url).Election("job")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		waitFile(t, log, 10*time.Second)
		_, _, _, _ = e.ForceRelease(context.Background())
	}()
	std, _, errb := testIO()
	if err := runElect(context.Background(), opts, std); codeOf(err) != 5 {
		t.Fatalf("exit %d (%v), want 5 from the second run; stderr %s", codeOf(err), err, errb)
	}
	var terms []int
	for _, f := range strings.Fields(readFile(t, log)) {
		n, _ := strconv.Atoi(f)
		terms = append(terms, n)
	}
	if len(terms) != 2 || terms[0] < 1 || terms[1] <= terms[0] {
		t.Errorf("terms %v, want two, the second higher", terms)
	}
	for _, want := range []string{"SIGTERM", "campaigning again"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q: %s", want, errb)
		}
	}
}

// TestLsAndInspectShowKinds: ls and inspect have a KIND column, permit
// K/N for a semaphore's permits; the JSON says kind and slot.
func TestLsAndInspectShowKinds(t *testing.T) {
	url := memURL(t)
	l := openMem(t, url)
	hold(t, url, "m", dlock.WithOwner("o1"), dlock.WithTTL(time.Minute))
	sem := semaphore(t, l, "s", 4)
	p, err := sem.TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Election("e")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Campaign(context.Background(), "http://leader"); err != nil {
		t.Fatal(err)
	}
	std, out, _ := testIO()
	if err := runLs(context.Background(), &lsOptions{URL: url}, std); err != nil {
		t.Fatal(err)
	}
	for _, re := range []string{`(?m)^NAME +KIND +OWNER +FENCE +TIME LEFT$`, `(?m)^m +mutex +o1 +\d+ `,
		`(?m)^s +permit ` + strconv.Itoa(p.Slot()) + `/4 +permit-holder +\d+ `, `(?m)^e +leader +http://leader +\d+ `} {
		if !regexp.MustCompile(re).MatchString(out.String()) {
			t.Errorf("ls lacks %s:\n%s", re, out)
		}
	}
	std, out, _ = testIO()
	if err := runInspect(context.Background(), &inspectOptions{URL: url, Name: "s", JSON: true}, std); err != nil {
		t.Fatal(err)
	}
	var rec holderRecord
	if err := json.Unmarshal(out.Bytes(), &rec); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if rec.Kind != "permit" || rec.Permits != 4 || rec.Slot == nil || *rec.Slot != p.Slot() || len(rec.Grants) != 1 {
		t.Errorf("inspect --json s = %s", out)
	}
}

// TestReleaseForcePermit frees one permit, found by its index, and names
// it; the semaphore's size comes from the held permits or --permits.
func TestReleaseForcePermit(t *testing.T) {
	url := memURL(t)
	sem := semaphore(t, openMem(t, url), "s", 2)
	a, err := sem.TryAcquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sem.TryAcquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	opts := &releaseOptions{URL: url, Name: "s", Force: true}
	std, _, _ := testIO()
	if err := runRelease(context.Background(), opts, std); codeOf(err) != ExitUsage || !strings.Contains(err.Error(), "--permit K") {
		t.Errorf("release of a semaphore without --permit: %v, want a usage error pointing to --permit", err)
	}
	opts.HasPermit, opts.Permit = true, a.Slot()
	std, out, _ := testIO()
	if err := runRelease(context.Background(), opts, std); err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("released permit %d of s, held by permit-holder (fence %d); its fence is now %d", a.Slot(), a.Fence(), a.Fence()+1); !strings.Contains(out.String(), want) {
		t.Errorf("release said %q, want %q", out, want)
	}
	c, err := sem.TryAcquire(context.Background())
	if err != nil || c.Slot() != a.Slot() {
		t.Errorf("after the release: %v, permit %v; want permit %d", err, c, a.Slot())
	}
	opts.Permit = 2
	if err := runRelease(context.Background(), opts, std); codeOf(err) != ExitUsage || !strings.Contains(err.Error(), "permit 2") {
		t.Errorf("release of permit 2 of 2: %v, want a usage error naming it", err)
	}
	opts.Name, opts.Permit = "unheld", 0
	if err := runRelease(context.Background(), opts, std); codeOf(err) != ExitUsage || !strings.Contains(err.Error(), "--permits N") {
		t.Errorf("release of an unheld permit without --permits: %v, want a usage error", err)
	}
	opts.Permits = 3
	if err := runRelease(context.Background(), opts, std); err != nil {
		t.Errorf("release of an unheld permit with --permits: %v", err)
	}
}

// TestReleaseForceEndsATerm: release --force of an election's name ends
// the leader's term.
func TestReleaseForceEndsATerm(t *testing.T) {
	url := memURL(t)
	e, err := openMem(t, url).Election("e")
	if err != nil {
		t.Fatal(err)
	}
	lease, err := e.Campaign(context.Background(), "me", dlock.WithTTL(3*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	std, out, _ := testIO()
	if err := runRelease(context.Background(), &releaseOptions{URL: url, Name: "e", Force: true}, std); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), fmt.Sprintf("released e, held by me (fence %d)", lease.Fence())) {
		t.Errorf("release said %q", out)
	}
	select {
	case <-lease.Done():
	case <-time.After(30 * time.Second):
		t.Error("the leader's lease did not end")
	}
}

// TestChildEnvDropsAnEnclosingGrant: a command under a plain lock started
// inside another dlock's permit or term does not inherit it.
func TestChildEnvDropsAnEnclosingGrant(t *testing.T) {
	_, lease := hold(t, memURL(t), "n")
	env := strings.Join(childEnv([]string{"DLOCK_PERMIT=1", "DLOCK_TERM=9", "PATH=" + os.Getenv("PATH")}, lease), " ")
	if strings.Contains(env, "DLOCK_PERMIT") || strings.Contains(env, "DLOCK_TERM") {
		t.Errorf("childEnv = %s", env)
	}
}
