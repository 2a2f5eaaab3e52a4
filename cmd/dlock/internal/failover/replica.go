package failover

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Bounds on a replica's process: far above what a live one needs, so that
// they only end a harness that would otherwise hang.
const (
	startBound = 30 * time.Second // until /healthz answers
	stopBound  = 30 * time.Second // from SIGTERM until the process exits
)

// maxConnsPerClient is --max-conns-per-client: every client of the
// harness connects from 127.0.0.1, one address.
const maxConnsPerClient = 100000

// replica is one `dlock serve` process, started again on the same port
// and with the same files after a stop.
type replica struct {
	index int
	base  string // http://127.0.0.1:PORT
	args  []string
	bin   string
	log   string // its stderr, across restarts

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
}

// replicaArgs is the command line of a replica listening on port.
func replicaArgs(url string, port int, f files, keyFile bool) []string {
	args := []string{"serve", "--url", url, "--listen", "127.0.0.1:" + strconv.Itoa(port),
		"--token-file", f.tokens, "--admin-token-file", f.admins, "--signin-link", "never",
		"--max-conns-per-client", strconv.Itoa(maxConnsPerClient)}
	if keyFile {
		args = append(args, "--lease-key-file", f.leaseKeys)
	}
	return args
}

// start runs the process and waits until it answers /healthz.
func (r *replica) start(ctx context.Context) error {
	log, err := os.OpenFile(r.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(r.bin, r.args...)
	cmd.Env = withoutDlockEnv(os.Environ())
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("failover: start replica %d: %w", r.index, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); log.Close(); close(exited) }()
	r.mu.Lock()
	r.cmd, r.exited = cmd, exited
	r.mu.Unlock()
	if err := r.waitHealthy(ctx, exited); err != nil {
		r.kill()
		return err
	}
	return nil
}

// waitHealthy polls /healthz until it answers 200, the process exits, or
// startBound passes.
func (r *replica) waitHealthy(ctx context.Context, exited <-chan struct{}) error {
	ctx, cancel := context.WithTimeout(ctx, startBound)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	defer hc.CloseIdleConnections()
	for {
		if resp, err := hc.Get(r.base + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("failover: replica %d exited at start (its log: %s)", r.index, r.log)
		case <-ctx.Done():
			return fmt.Errorf("failover: replica %d did not answer /healthz within %s (its log: %s)", r.index, startBound, r.log)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// running reports whether the process is up (started and not stopped).
func (r *replica) running() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cmd != nil
}

// kill ends the process with SIGKILL and waits for it; a no-op when it
// is not running.
func (r *replica) kill() { _ = r.signal(syscall.SIGKILL) }

// terminate stops the process with SIGTERM (it releases its leases) and
// waits for it to exit; past stopBound it is killed and that is an error.
func (r *replica) terminate() error { return r.signal(syscall.SIGTERM) }

func (r *replica) signal(sig syscall.Signal) error {
	r.mu.Lock()
	cmd, exited := r.cmd, r.exited
	r.cmd = nil
	r.mu.Unlock()
	if cmd == nil {
		return nil
	}
	_ = cmd.Process.Signal(sig)
	select {
	case <-exited:
		return nil
	case <-time.After(stopBound):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("failover: replica %d did not exit within %s of %v (its log: %s)", r.index, stopBound, sig, r.log)
	}
}

// withoutDlockEnv drops the variables that would give a replica another
// backend or other tokens than its flags.
func withoutDlockEnv(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name != "DLOCK_URL" && name != "DLOCK_SERVE_TOKEN" && name != "DLOCK_SERVE_ADMIN_TOKEN" {
			out = append(out, kv)
		}
	}
	return out
}

// replicas is the set a run starts, in address order.
type replicas []*replica

// live is the replicas that are running.
func (rs replicas) live() replicas {
	var out replicas
	for _, r := range rs {
		if r.running() {
			out = append(out, r)
		}
	}
	return out
}

// stopAll terminates every running replica, joining their errors.
func (rs replicas) stopAll() error {
	var errs []error
	for _, r := range rs {
		errs = append(errs, r.terminate())
	}
	return errors.Join(errs...)
}
