package mysqlfence_test

import (
	"io"
	"os"
	"testing"

	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// exampleOutput is what Example prints on a fresh database.
const exampleOutput = `<nil>
true fence: write to "accounts[42]" with fence 33 rejected: fence 34 has written since
fence: write to "accounts" with fence 33 rejected: fence 34 has written since
100
`

// TestExample runs the package Example against a test MariaDB (through
// MYSQL_DSN, as a reader of the Example would) and checks what it prints.
func TestExample(t *testing.T) {
	srv := testserver.MariaDB(t)
	t.Setenv("MYSQL_DSN", srv.DSN(srv.NewDatabase(t)))
	if got := captureStdout(t, Example); got != exampleOutput {
		t.Fatalf("Example printed\n%s\nwant\n%s", got, exampleOutput)
	}
}

// captureStdout runs f with os.Stdout going to a pipe and returns what it
// wrote.
func captureStdout(t *testing.T, f func()) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	stdout := os.Stdout
	os.Stdout = w
	out := make(chan string)
	go func() { b, _ := io.ReadAll(r); out <- string(b) }()
	defer func() { os.Stdout = stdout }()
	f()
	w.Close()
	return <-out
}
