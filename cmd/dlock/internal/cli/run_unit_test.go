package cli

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	_ "github.com/dlockdev/dlock/memlock"
)

// testIO returns an IO writing to buffers, not a terminal. The buffers
// are safe to share with a child process's output copier.
func testIO() (*IO, *syncBuffer, *syncBuffer) {
	var out, errb syncBuffer
	return &IO{In: strings.NewReader(""), Out: &out, Err: &errb}, &out, &errb
}

// memURL is an in-process backend private to t.
func memURL(t testing.TB) string { return "mem://" + strings.ReplaceAll(t.Name(), "/", "_") }

func runOpts(url string, cmd ...string) *runOptions {
	return &runOptions{URL: url, Name: "job", Command: cmd, TTL: 5 * time.Second,
		Grace: time.Second, ConflictExitCode: ExitHeld}
}

// hold takes name on url from the test process and releases it in cleanup.
func hold(t *testing.T, url, name string, opts ...dlock.Option) (*dlock.Locker, *dlock.Lease) {
	t.Helper()
	l, err := dlock.Open(context.Background(), url, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	lease, err := l.TryAcquire(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	return l, lease
}

func TestRunRunPassesTheExitCode(t *testing.T) {
	std, _, _ := testIO()
	err := runRun(context.Background(), runOpts(memURL(t), "sh", "-c", "exit 3"), std)
	if got := codeOf(err); got != 3 {
		t.Fatalf("exit code %d (%v), want 3", got, err)
	}
	if line := errorLine(err); line != "" {
		t.Errorf("a failing command must not add an error line, got %q", line)
	}
}

func TestRunRunSignalledCommandExits128PlusN(t *testing.T) {
	std, _, _ := testIO()
	err := runRun(context.Background(), runOpts(memURL(t), "sh", "-c", "kill -9 $$"), std)
	if got := codeOf(err); got != 128+9 {
		t.Fatalf("exit code %d (%v), want 137", got, err)
	}
}

func TestRunRunGivesTheChildItsLease(t *testing.T) {
	t.Setenv("DLOCK_URL", "redis://:hunter2@example.invalid:6379")
	envFile := filepath.Join(t.TempDir(), "env")
	std, _, _ := testIO()
	err := runRun(context.Background(), runOpts(memURL(t), "sh", "-c", "env > "+envFile), std)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	for _, re := range []string{`(?m)^DLOCK_NAME=job$`, `(?m)^DLOCK_FENCE=1$`, `(?m)^DLOCK_TOKEN=[0-9a-f]{32}$`} {
		if !regexp.MustCompile(re).MatchString(env) {
			t.Errorf("child env lacks %s", re)
		}
	}
	if strings.Contains(env, "hunter2") || strings.Contains(env, "DLOCK_URL") {
		t.Errorf("child env carries DLOCK_URL with its password")
	}
}

func TestRunRunConflictNamesTheHolder(t *testing.T) {
	url := memURL(t)
	hold(t, url, "job", dlock.WithOwner("cron@host-b"), dlock.WithTTL(time.Minute))
	for _, code := range []int{ExitHeld, 99} {
		std, out, _ := testIO()
		opts := runOpts(url, "echo", "ran")
		opts.ConflictExitCode = code
		err := runRun(context.Background(), opts, std)
		if got := codeOf(err); got != code {
			t.Fatalf("exit code %d (%v), want %d", got, err, code)
		}
		line := errorLine(err)
		for _, want := range []string{`"job"`, "cron@host-b", "fence 1", "left"} {
			if !strings.Contains(line, want) {
				t.Errorf("conflict line %q lacks %q", line, want)
			}
		}
		if out.Len() != 0 {
			t.Errorf("the command ran: %q", out.String())
		}
	}
}

func TestRunRunWaitsThenGivesUp(t *testing.T) {
	url := memURL(t)
	hold(t, url, "job", dlock.WithTTL(time.Minute))
	std, _, _ := testIO()
	opts := runOpts(url, "true")
	opts.Wait = 200 * time.Millisecond
	err := runRun(context.Background(), opts, std)
	if codeOf(err) != ExitHeld || !strings.Contains(errorLine(err), "still held after waiting 200ms") {
		t.Fatalf("got %d %q", codeOf(err), errorLine(err))
	}
}

func TestRunRunRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*runOptions)
	}{
		{"no command", func(o *runOptions) { o.Command = nil }},
		{"negative wait", func(o *runOptions) { o.Wait = -time.Second }},
		{"negative grace", func(o *runOptions) { o.Grace = -time.Second }},
		{"conflict code out of range", func(o *runOptions) { o.ConflictExitCode = 256 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := runOpts("bogus://never-opened", "true")
			tc.edit(opts)
			std, _, _ := testIO()
			if err := runRun(context.Background(), opts, std); codeOf(err) != ExitUsage {
				t.Fatalf("got %d (%v), want usage", codeOf(err), err)
			}
		})
	}
}

func TestRunRunLostLeaseStopsTheCommand(t *testing.T) {
	url := memURL(t)
	dir := t.TempDir()
	opts := runOpts(url, "sh", "-c", "echo started > "+dir+"/started; sleep 30")
	opts.TTL, opts.Grace = 300*time.Millisecond, 500*time.Millisecond
	admin, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	go func() {
		waitFile(t, dir+"/started", 10*time.Second)
		_, _, _, _ = admin.ForceRelease(context.Background(), "job")
	}()
	std, _, errb := testIO()
	start := time.Now()
	err = runRun(context.Background(), opts, std)
	if codeOf(err) != ExitLeaseLost {
		t.Fatalf("exit %d (%v), want %d; stderr %s", codeOf(err), err, ExitLeaseLost, errb)
	}
	if time.Since(start) > 20*time.Second {
		t.Errorf("the command was not stopped promptly")
	}
	if !strings.Contains(errb.String(), "SIGTERM") {
		t.Errorf("stderr does not say the command was sent SIGTERM: %s (err %v)", errb, err)
	}
}

func TestChildEnv(t *testing.T) {
	l, lease := hold(t, memURL(t), "n")
	_ = l
	env := childEnv([]string{"A=1", "DLOCK_FENCE=999", "DLOCK_URL=redis://:pw@h:1"}, lease)
	got := strings.Join(env, " ")
	// The parent's DLOCK_FENCE is replaced, not kept (a random token may
	// hold "999": the whole variable is looked for).
	if slices.Contains(env, "DLOCK_FENCE=999") || strings.Contains(got, "pw@") || !slices.Contains(env, "A=1") {
		t.Errorf("childEnv = %v", env)
	}
	env = childEnv([]string{"DLOCK_URL=redis://h:1"}, lease)
	if !strings.Contains(strings.Join(env, " "), "DLOCK_URL=redis://h:1") {
		t.Errorf("a DLOCK_URL without password should be kept: %v", env)
	}
}

// TestRunRunRefusesASemaphoreName: `dlock run NAME` while NAME's permits
// are held names both uses instead of running beside the semaphore.
func TestRunRunRefusesASemaphoreName(t *testing.T) {
	url := memURL(t)
	l, err := dlock.Open(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	sem, _ := l.Semaphore("job", 3, dlock.WithTTL(time.Minute))
	if _, err := sem.Acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	std, out, _ := testIO()
	err = runRun(context.Background(), runOpts(url, "echo", "ran"), std)
	if line := errorLine(err); !strings.Contains(line, "semaphore of 3 permits") || !strings.Contains(line, "mutex") {
		t.Errorf("run on a semaphore's name: %q (exit %d), want it to name both kinds", line, codeOf(err))
	}
	if out.Len() != 0 {
		t.Errorf("the command ran: %q", out.String())
	}
}
