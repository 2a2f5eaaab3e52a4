package filelock_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/filelock"
)

func diagnose(t *testing.T, l *dlock.Locker) map[string]driver.Finding {
	t.Helper()
	d, ok := l.Driver().(driver.Diagnoser)
	if !ok {
		t.Fatal("the file driver is not a driver.Diagnoser")
	}
	fs, err := d.Diagnose(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]driver.Finding{}
	for _, f := range fs {
		m[f.Check] = f
	}
	return m
}

// TestDiagnoseOpenedByURL: a database opened by filelock on a local disk
// passes every check; sync=full is reported as such.
func TestDiagnoseOpenedByURL(t *testing.T) {
	path := filepath.Join(t.TempDir(), "locks.db")
	l, err := dlock.Open(context.Background(), "file://"+path+"?sync=full")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m := diagnose(t, l)
	for _, check := range []string{"file system", "journal mode", "busy timeout", "sync"} {
		f, ok := m[check]
		if !ok {
			t.Errorf("no %q finding in %v", check, m)
			continue
		}
		if f.Verdict != driver.VerdictOK {
			t.Errorf("%s: %s %s (fix %s)", check, f.Verdict, f.Detail, f.Fix)
		}
	}
	if !strings.Contains(m["file system"].Detail, path) || !strings.Contains(m["sync"].Detail, "full") {
		t.Errorf("details do not name the file and the sync level: %+v", m)
	}
}

// TestDiagnoseCallersDatabase: a caller's *sql.DB opened without WAL or a
// busy timeout is warned about, with the fix.
func TestDiagnoseCallersDatabase(t *testing.T) {
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "own.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	l, err := filelock.NewDB(db)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	m := diagnose(t, l)
	for _, check := range []string{"journal mode", "busy timeout"} {
		if f := m[check]; f.Verdict != driver.VerdictWarn || f.Fix == "" {
			t.Errorf("%s: got %+v, want a warning with a fix", check, f)
		}
	}
}
