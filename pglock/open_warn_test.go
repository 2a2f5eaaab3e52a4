package pglock_test

import (
	"bytes"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/dlockdev/dlock"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestOpenWarnsSynchronousCommitOffOnce: Open says once per process and
// server that synchronous_commit=off breaks fences across a crash, through
// the Locker's logger; a second Open says nothing more.
func TestOpenWarnsSynchronousCommitOffOnce(t *testing.T) {
	srv := testserver.Postgres(t)
	u := srv.NewDatabase(t) + "&options=" + strings.ReplaceAll(url.QueryEscape("-c synchronous_commit=off"), "+", "%20")
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	for range 2 {
		l, err := dlock.Open(ctx(t), u, dlock.WithLogger(logger))
		if err != nil {
			t.Fatal(err)
		}
		l.Close()
	}
	if n := strings.Count(buf.String(), "synchronous_commit=off"); n != 1 {
		t.Errorf("%d warnings about synchronous_commit=off after two Opens, want 1:\n%s", n, buf.String())
	}
	buf.Reset()
	l, err := dlock.Open(ctx(t), srv.NewDatabase(t), dlock.WithLogger(logger))
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if buf.Len() != 0 {
		t.Errorf("a warning with synchronous_commit on: %s", buf.String())
	}
}
