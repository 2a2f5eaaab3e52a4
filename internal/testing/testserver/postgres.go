package testserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// pgBinDir is where Debian installs the PostgreSQL server binaries, which
// are not on PATH by default.
const pgBinDir = "/usr/lib/postgresql/15/bin"

// pgUser is the unprivileged account PostgreSQL runs as when the tests run
// as root: postgres refuses to start as root.
const pgUser = "postgres"

// pgSuperuser is the database superuser the tests connect as over TCP on
// 127.0.0.1. It is trusted: password authentication (SCRAM) costs every
// new connection milliseconds of CPU, which a loaded test machine cannot
// spare under sub-second TTLs.
const pgSuperuser = "dlock"

// pgAuthUser is a role that must give Password, for tests of
// authentication failures (see AuthURL).
const pgAuthUser = "dlock_auth"

// pgHBA trusts the superuser and asks everyone else for a password.
const pgHBA = `local all all trust
host all ` + pgSuperuser + ` 127.0.0.1/32 trust
host all all 127.0.0.1/32 scram-sha-256
`

// PostgresServer is a PostgreSQL server started for tests on a free
// loopback port, in a temporary directory, with fsync off.
type PostgresServer struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// User is the superuser, trusted without a password.
	User string
	// Password is what AuthURL's role must give.
	Password string

	dir   string
	bin   string
	cred  *syscall.Credential
	dbSeq atomic.Int64
	once  sync.Once

	mu     sync.Mutex // guards cmd and exited, which Restart replaces
	cmd    *exec.Cmd
	exited chan struct{}
}

// pgShared is the one PostgreSQL server a test binary shares.
var pgShared = sharedServer[PostgresServer]{
	start: NewPostgresDetached,
	alive: func(s *PostgresServer) bool { return !s.stopped() },
	stop:  (*PostgresServer).Stop,
}

// Postgres returns the test binary's shared PostgreSQL server, starting it
// if needed. It is stopped when the last test using it has finished (its
// t.Cleanup), so tests that need it concurrently (subtests, t.Parallel)
// share one process. Hand each test its own database with NewDatabase.
// Calling Stop on the shared server stops it for every user; tests that
// stop a server should use NewPostgres.
func Postgres(t testing.TB) *PostgresServer {
	t.Helper()
	return pgShared.get(t)
}

// NewPostgres starts a dedicated PostgreSQL server, stopped in t.Cleanup.
// Use it for tests that stop the server.
func NewPostgres(t testing.TB) *PostgresServer {
	t.Helper()
	srv := NewPostgresDetached(t)
	t.Cleanup(srv.Stop)
	return srv
}

// NewPostgresDetached starts a PostgreSQL server whose lifetime the caller
// manages: it must call Stop. t is used only for skipping and failing.
func NewPostgresDetached(t testing.TB) *PostgresServer {
	t.Helper()
	initdb := Binary(t, "initdb", pgBinDir)
	postgres := Binary(t, "postgres", pgBinDir)
	srv := &PostgresServer{User: pgSuperuser, Password: pgRandomHex(12), exited: make(chan struct{})}
	if err := srv.start(t, initdb, postgres); err != nil {
		srv.Stop()
		t.Fatalf("start postgres: %v", err)
	}
	return srv
}

func (s *PostgresServer) start(t testing.TB, initdb, postgres string) error {
	cred, err := pgCredential()
	if err != nil {
		return err
	}
	if s.dir, err = pgDir(cred); err != nil {
		return err
	}
	if err := s.initdb(initdb, cred); err != nil {
		return err
	}
	s.Port = FreePort(t)
	s.bin, s.cred = postgres, cred
	if err := s.spawn(postgres, cred); err != nil {
		return err
	}
	if err := s.waitReady(60 * time.Second); err != nil {
		return err
	}
	return s.exec(fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD '%s'", pgAuthUser, s.Password))
}

// pgCredential is the user to run PostgreSQL as: postgres when we are
// root, nil (ourselves) otherwise.
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup(pgUser)
	if err != nil {
		return nil, fmt.Errorf("running as root and no %q user to run PostgreSQL as: %w", pgUser, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// pgDir makes a private directory owned by the server's user; t.TempDir is
// root-owned and 0700, which postgres could not enter.
func pgDir(cred *syscall.Credential) (string, error) {
	dir, err := os.MkdirTemp("", "dlock-pg-")
	if err != nil {
		return "", err
	}
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			return dir, err
		}
	}
	return dir, nil
}

func (s *PostgresServer) initdb(bin string, cred *syscall.Credential) error {
	cmd := exec.Command(bin, "-D", filepath.Join(s.dir, "data"), "-U", s.User, "--auth=trust",
		"-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %v\n%s", err, out)
	}
	// Written as root into a file the server only reads.
	return os.WriteFile(filepath.Join(s.dir, "data", "pg_hba.conf"), []byte(pgHBA), 0o644)
}

func (s *PostgresServer) spawn(bin string, cred *syscall.Credential) error {
	logf, err := os.Create(filepath.Join(s.dir, "postgres.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-D", filepath.Join(s.dir, "data"),
		"-p", strconv.Itoa(s.Port), "-h", "127.0.0.1", "-k", s.dir,
		"-c", "fsync=off", "-c", "full_page_writes=off",
		"-c", "max_connections=500", "-c", "shared_buffers=64MB")
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig stops the server should the test binary die without
	// running its cleanups; SIGQUIT is PostgreSQL's immediate shutdown.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.cmd, s.exited = cmd, exited
	s.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	return nil
}

func (s *PostgresServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := s.ping()
		if err == nil {
			return nil
		}
		if s.stopped() {
			return fmt.Errorf("postgres exited during start-up:\n%s", s.Log())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("postgres not ready after %s: %v\n%s", timeout, err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (s *PostgresServer) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return err
	}
	return c.Close(ctx)
}

// URL returns the URL of the server's administrative database "postgres".
func (s *PostgresServer) URL() string { return s.DatabaseURL("postgres") }

// DatabaseURL returns the URL of the named database on this server.
func (s *PostgresServer) DatabaseURL(db string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/%s?sslmode=disable", s.User, s.Port, db)
}

// AuthURL returns the URL of database db for a role that must authenticate
// with Password (SCRAM), using password instead: a wrong one fails.
func (s *PostgresServer) AuthURL(db, password string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", pgAuthUser, password, s.Port, db)
}

// NewDatabase creates a fresh, empty database and returns its URL; it is
// dropped in t.Cleanup (if the server still runs).
func (s *PostgresServer) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("dlock_test_%d", s.dbSeq.Add(1))
	if err := s.exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !s.stopped() {
			_ = s.exec("DROP DATABASE IF EXISTS " + name + " WITH (FORCE)")
		}
	})
	return s.DatabaseURL(name)
}

// Exec runs one SQL statement on the administrative database.
func (s *PostgresServer) exec(sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.URL())
	if err != nil {
		return err
	}
	defer c.Close(ctx)
	_, err = c.Exec(ctx, sql)
	return err
}

// Log returns the server's log so far, for failure messages.
func (s *PostgresServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "postgres.log"))
	return string(b)
}

func (s *PostgresServer) stopped() bool {
	_, exited := s.process()
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

// Stop shuts the server down at once (immediate shutdown, SIGQUIT: every
// session ends, no checkpoint, as fast as a crash) and removes its
// directory. It is idempotent.
func (s *PostgresServer) Stop() {
	s.once.Do(func() {
		if cmd, _ := s.process(); cmd != nil && cmd.Process != nil {
			s.signalAndWait()
		}
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
	})
}

func (s *PostgresServer) signalAndWait() {
	cmd, exited := s.process()
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
		return
	case <-time.After(10 * time.Second):
	}
	// SIGKILL the whole process group: a killed postmaster leaves its
	// backends running.
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

func (s *PostgresServer) process() (*exec.Cmd, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.exited
}

func pgRandomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
