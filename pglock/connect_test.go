package pglock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
	"github.com/jackc/pgx/v5/pgconn"
)

// TestOpenNamesTheFailure: a URL at another kind of server, or naming a
// missing database, fails Open with what went wrong first and nothing
// else: a Redis server never answers PostgreSQL's first message, and Open
// waited out its context; with sslmode=prefer, pgx's refused TLS attempt
// came before the server's own error.
func TestOpenNamesTheFailure(t *testing.T) {
	const secret = "s3cr3t-pa55"
	rd := testserver.Redis(t)
	pg := testserver.Postgres(t)
	web := httptest.NewServer(http.NotFoundHandler())
	defer web.Close()
	webAddr := strings.TrimPrefix(web.URL, "http://")
	greeter := greetingServer(t, "220 mail.example.com ESMTP ready\r\n")
	for _, c := range []struct {
		name, url, want string
	}{
		{"a Redis port", "postgresql://u:" + secret + "@" + rd.Addr + "/db",
			"pglock: the server at " + rd.Addr + " did not answer as PostgreSQL (it answered like Redis: is this a redis:// address?)"},
		{"an HTTP port", "postgres://u:" + secret + "@" + webAddr + "/db",
			"pglock: the server at " + webAddr + ` did not answer as PostgreSQL (it answered a Redis PING, which PostgreSQL does not: "HTTP/1.1 400 Bad"`},
		{"a server that speaks first", "postgres://u:" + secret + "@" + greeter + "/db",
			"pglock: the server at " + greeter + ` did not answer as PostgreSQL (it sent an unexpected reply: "220 mail.example"`},
		{"a missing database", fmt.Sprintf("postgres://dlock:%s@127.0.0.1:%d/nosuch_db", secret, pg.Port),
			fmt.Sprintf("failed to connect to `user=dlock database=nosuch_db` at 127.0.0.1:%d: database \"nosuch_db\" does not exist (SQLSTATE 3D000); create it", pg.Port)},
	} {
		t.Run(c.name, func(t *testing.T) {
			// Well before the context, so that a wait for it fails.
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			l, err := dlock.Open(ctx, c.url)
			if err == nil {
				_ = l.Close()
				t.Fatal("Open succeeded")
			}
			msg := err.Error()
			if !strings.Contains(msg, c.want) || strings.Contains(msg, "TLS") || strings.Contains(msg, "deadline") {
				t.Errorf("Open: %v\nwant it to say %q, with no TLS attempt and no deadline", err, c.want)
			}
			if strings.Contains(msg, secret) {
				t.Errorf("the password leaked: %v", err)
			}
		})
	}
	t.Run("the server's error unwraps", func(t *testing.T) {
		_, err := dlock.Open(ctx(t), fmt.Sprintf("postgres://dlock@127.0.0.1:%d/nosuch_db", pg.Port))
		var pe *pgconn.PgError
		if !errors.As(err, &pe) || pe.Code != "3D000" {
			t.Errorf("Open: %v, want a *pgconn.PgError 3D000 inside", err)
		}
	})
}

// greetingServer listens on a loopback port and greets every connection
// with line, as SMTP, FTP or MySQL servers speak first; it returns the
// address.
func greetingServer(t *testing.T, line string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() { _ = ln.Close(); <-done })
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte(line))
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}
