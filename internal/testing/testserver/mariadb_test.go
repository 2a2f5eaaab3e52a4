package testserver_test

import (
	"strings"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestMariaDB: a server starts, gives each test a database, refuses a
// wrong password, dies on Kill and serves the same data after Restart.
func TestMariaDB(t *testing.T) {
	s := testserver.NewMariaDB(t)
	db := s.NewDatabase(t)
	if err := s.Exec("CREATE TABLE " + db + ".t (n INT) ENGINE=InnoDB"); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec("INSERT INTO " + db + ".t VALUES (7)"); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	if err := s.Exec("SELECT 1"); err == nil {
		t.Fatal("a killed server still answers")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec("DELETE FROM " + db + ".t WHERE n = 7"); err != nil {
		t.Fatalf("after Restart: %v", err)
	}
	if !strings.Contains(s.AuthURL(db, "x"), "dlock_auth:x@") {
		t.Fatalf("AuthURL = %q", s.AuthURL(db, "x"))
	}
}
