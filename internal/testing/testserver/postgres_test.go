package testserver

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestPostgres(t *testing.T) {
	srv := Postgres(t)
	if again := Postgres(t); again != srv {
		t.Fatal("Postgres(t) did not share the running server")
	}
	ctx := context.Background()
	url := srv.NewDatabase(t)
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatalf("connect to new database: %v", err)
	}
	defer c.Close(ctx)
	var user string
	if err := c.QueryRow(ctx, "SELECT current_user").Scan(&user); err != nil || user != srv.User {
		t.Fatalf("current_user = %q, %v; want %q", user, err, srv.User)
	}
	if c, err := pgx.Connect(ctx, srv.AuthURL("postgres", srv.Password)); err != nil {
		t.Errorf("AuthURL with the right password: %v", err)
	} else {
		c.Close(ctx)
	}
	if c, err := pgx.Connect(ctx, srv.AuthURL("postgres", "wrong")); err == nil {
		c.Close(ctx)
		t.Error("AuthURL with a wrong password connected")
	}
	if srv.NewDatabase(t) == url {
		t.Fatal("NewDatabase returned the same database twice")
	}
}

func TestPostgresStop(t *testing.T) {
	srv := NewPostgres(t)
	srv.Stop()
	if !srv.stopped() {
		t.Fatal("server still running after Stop")
	}
	if err := srv.ping(); err == nil {
		t.Fatal("ping succeeded after Stop")
	}
}

func TestPostgresKillRestart(t *testing.T) {
	srv := NewPostgres(t)
	if err := srv.exec("CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	if err := srv.ping(); err == nil {
		t.Fatal("ping succeeded after Kill")
	}
	srv.Restart(t)
	if err := srv.exec("SELECT v FROM kept"); err != nil {
		t.Fatalf("after restart: %v", err)
	}
}

func TestPostgresPause(t *testing.T) {
	srv := NewPostgres(t)
	ctx := context.Background()
	c, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	srv.Pause()
	short, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	_, err = c.Exec(short, "SELECT 1")
	srv.Resume()
	if err == nil {
		t.Fatal("a statement on a paused server succeeded")
	}
	c2, err := pgx.Connect(ctx, srv.URL())
	if err != nil {
		t.Fatalf("after Resume: %v", err)
	}
	c2.Close(ctx)
}
