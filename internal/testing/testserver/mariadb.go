package testserver

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
)

// mariadbUser is the account the tests connect as over TCP on 127.0.0.1:
// a superuser without a password (a test server on loopback).
const mariadbUser = "dlock"

// mariadbAuthUser is an account that must give MariaDBServer.Password,
// for tests of authentication failures (AuthURL).
const mariadbAuthUser = "dlock_auth"

// MariaDBServer is a MariaDB server started for tests on a free loopback
// port, in a temporary directory (mariadb-install-db, then mariadbd), with
// durability settings off unless Extra says otherwise.
type MariaDBServer struct {
	// Port is the TCP port on 127.0.0.1.
	Port int
	// User is the superuser, without a password.
	User string
	// Password is what AuthURL's account must give.
	Password string
	// Extra are more mariadbd options ("--innodb-flush-log-at-trx-commit=1"),
	// kept across Restart.
	Extra []string

	dir   string
	bin   string
	dbSeq atomic.Int64
	once  sync.Once

	mu     sync.Mutex // guards cmd and exited, which Restart replaces
	cmd    *exec.Cmd
	exited chan struct{}
}

// mariadbShared is the one MariaDB server a test binary shares.
var mariadbShared = sharedServer[MariaDBServer]{
	start: func(t testing.TB) *MariaDBServer { return NewMariaDBDetached(t) },
	alive: func(s *MariaDBServer) bool { return !s.stopped() },
	stop:  (*MariaDBServer).Stop,
}

// MariaDB returns the test binary's shared MariaDB server, starting it if
// needed; it stops when the last test using it has finished. Hand each
// test its own database with NewDatabase. Tests that stop or restart a
// server use NewMariaDB.
func MariaDB(t testing.TB) *MariaDBServer {
	t.Helper()
	return mariadbShared.get(t)
}

// NewMariaDB starts a dedicated MariaDB server with more mariadbd options,
// stopped in t.Cleanup.
func NewMariaDB(t testing.TB, extra ...string) *MariaDBServer {
	t.Helper()
	srv := NewMariaDBDetached(t, extra...)
	t.Cleanup(srv.Stop)
	return srv
}

// NewMariaDBDetached starts a MariaDB server whose lifetime the caller
// manages: it must call Stop. t is used only for skipping and failing.
func NewMariaDBDetached(t testing.TB, extra ...string) *MariaDBServer {
	t.Helper()
	install := Binary(t, "mariadb-install-db")
	bin := Binary(t, "mariadbd", "/usr/sbin")
	srv := &MariaDBServer{User: mariadbUser, Password: pgRandomHex(12), Extra: extra, bin: bin, exited: make(chan struct{})}
	dir, err := os.MkdirTemp("", "dlock-mariadb-")
	if err != nil {
		t.Fatal(err)
	}
	srv.dir = dir
	if err := srv.install(install); err != nil {
		srv.Stop()
		t.Fatalf("start mariadb: %v", err)
	}
	srv.Port = FreePort(t)
	if err := srv.Restart(); err != nil {
		srv.Stop()
		t.Fatalf("start mariadb: %v", err)
	}
	for _, q := range []string{
		"CREATE USER '" + mariadbUser + "'@'127.0.0.1'",
		"GRANT ALL ON *.* TO '" + mariadbUser + "'@'127.0.0.1' WITH GRANT OPTION",
		"CREATE USER '" + mariadbAuthUser + "'@'127.0.0.1' IDENTIFIED BY '" + srv.Password + "'",
		"GRANT ALL ON *.* TO '" + mariadbAuthUser + "'@'127.0.0.1'",
	} {
		if err := srv.execSocket(q); err != nil {
			srv.Stop()
			t.Fatalf("set up mariadb: %s: %v", q, err)
		}
	}
	return srv
}

// install makes the data directory. As root (CI), the server runs as
// root too: mariadbd refuses that without --user=root.
func (s *MariaDBServer) install(bin string) error {
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(s.dir, "data"), "--auth-root-authentication-method=normal",
		"--skip-test-db", "--skip-name-resolve"}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	// A private TMPDIR: the bootstrap's temporary tables in a shared /tmp
	// collided with another server's ("Error on delete of
	// '/tmp/#sql-temptable-…'") when several start at once.
	cmd := exec.Command(bin, args...)
	cmd.Dir = s.dir
	cmd.Env = append(os.Environ(), "TMPDIR="+s.tmp())
	if err := os.MkdirAll(s.tmp(), 0o700); err != nil {
		return err
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mariadb-install-db: %v\n%s", err, out)
	}
	return nil
}

// Restart starts the server (again, after Kill or Stop of the process, on
// the same port and data directory) and waits until it answers.
func (s *MariaDBServer) Restart() error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "mariadb.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	args := []string{"--no-defaults", "--datadir=" + filepath.Join(s.dir, "data"),
		"--bind-address=127.0.0.1", "--port=" + strconv.Itoa(s.Port), "--socket=" + s.socket(),
		"--pid-file=" + filepath.Join(s.dir, "mariadb.pid"), "--tmpdir=" + s.tmp(), "--skip-name-resolve", "--skip-log-bin",
		"--innodb-flush-log-at-trx-commit=2", "--sync-binlog=0", "--innodb-buffer-pool-size=64M",
		"--innodb-log-file-size=48M", "--max-connections=500", "--log-error=" + filepath.Join(s.dir, "mariadb.log")}
	if os.Geteuid() == 0 {
		args = append(args, "--user=root")
	}
	cmd := exec.Command(s.bin, append(args, s.Extra...)...)
	cmd.Dir = s.dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
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
	return s.waitReady(60 * time.Second)
}

func (s *MariaDBServer) socket() string { return filepath.Join(s.dir, "mariadb.sock") }

// tmp is the server's own temporary directory.
func (s *MariaDBServer) tmp() string { return filepath.Join(s.dir, "tmp") }

func (s *MariaDBServer) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		err := s.execSocket("SELECT 1")
		if err == nil {
			return nil
		}
		if s.stopped() {
			return fmt.Errorf("mariadbd exited during start-up:\n%s", s.Log())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd not ready after %s: %v\n%s", timeout, err, s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// execSocket runs a statement as root over the server's Unix socket.
func (s *MariaDBServer) execSocket(q string) error {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", s.socket()
	return execOn(cfg.FormatDSN(), q)
}

// Exec runs one statement as the superuser (over TCP).
func (s *MariaDBServer) Exec(q string) error {
	return execOn(s.DSN(""), q)
}

func execOn(dsn, q string) error {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, q)
	return err
}

// DSN is the go-sql-driver/mysql data source name of database db ("" for
// none) for the superuser.
func (s *MariaDBServer) DSN(db string) string {
	return fmt.Sprintf("%s@tcp(127.0.0.1:%d)/%s", s.User, s.Port, db)
}

// URL is the dlock URL of database db for the superuser.
func (s *MariaDBServer) URL(db string) string {
	return fmt.Sprintf("mysql://%s@127.0.0.1:%d/%s", s.User, s.Port, db)
}

// AuthURL is the dlock URL of database db for an account that must give
// Password, using password instead: a wrong one fails.
func (s *MariaDBServer) AuthURL(db, password string) string {
	return fmt.Sprintf("mysql://%s:%s@127.0.0.1:%d/%s", mariadbAuthUser, password, s.Port, db)
}

// NewDatabase creates a fresh, empty database and returns its name; it is
// dropped in t.Cleanup (if the server still runs).
func (s *MariaDBServer) NewDatabase(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("dlock_test_%d", s.dbSeq.Add(1))
	if err := s.Exec("CREATE DATABASE " + name); err != nil {
		t.Fatalf("create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if !s.stopped() {
			_ = s.Exec("DROP DATABASE IF EXISTS " + name)
		}
	})
	return name
}

// Log returns the server's log so far, for failure messages.
func (s *MariaDBServer) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "mariadb.log"))
	return string(b)
}

func (s *MariaDBServer) process() (*exec.Cmd, chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmd, s.exited
}

func (s *MariaDBServer) stopped() bool {
	_, exited := s.process()
	select {
	case <-exited:
		return true
	default:
		return false
	}
}

// Kill stops the server process at once (SIGKILL: a crash) and waits for
// it to exit; Restart starts it again on the same data.
func (s *MariaDBServer) Kill() {
	cmd, exited := s.process()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-exited
}

// Pause stops the server process (SIGSTOP) until Resume.
func (s *MariaDBServer) Pause() error {
	cmd, _ := s.process()
	return cmd.Process.Signal(syscall.SIGSTOP)
}

// Resume continues a paused server (SIGCONT).
func (s *MariaDBServer) Resume() error {
	cmd, _ := s.process()
	return cmd.Process.Signal(syscall.SIGCONT)
}

// Stop kills the server and removes its directory. It is idempotent.
func (s *MariaDBServer) Stop() {
	s.once.Do(func() {
		s.Kill()
		if s.dir != "" {
			_ = os.RemoveAll(s.dir)
		}
	})
}
