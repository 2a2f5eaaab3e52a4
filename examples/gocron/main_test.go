package main

import (
	"bytes"
	"context"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// TestMain fails the run if the program leaks a goroutine.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The program's own transcript: each slot of the report ran once, as the
// job's lines and the ledger agree, and the host that came second for a
// slot skipped it naming the run; then only the leader ran the tick, until
// its Locker closed and the other host took over with a later term.
func TestTranscript(t *testing.T) {
	var out, errOut bytes.Buffer
	o := options{url: "file://" + filepath.Join(t.TempDir(), "dlock.db"), slots: 3, splay: 300 * time.Millisecond, ticks: 2}
	if code := run(context.Background(), o, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s\n%s", code, errOut.String(), out.String())
	}
	t.Logf("\n%s", out.String())
	slots, leader := splitAt(t, out.String(), "== leader only")
	checkSlots(t, slots, o.slots)
	checkTakeover(t, leader, o.ticks)
}

func checkSlots(t *testing.T, transcript string, want int) {
	t.Helper()
	ledger := regexp.MustCompile(`(?m)^  slot (\S+) ran on (host-[ab]) \(fence \d+\) from .*: ok$`).FindAllStringSubmatch(transcript, -1)
	ran := strings.Count(transcript, "runs the report")
	if len(ledger) < want || ran != len(ledger) {
		t.Errorf("%d runs of the report, %d ok runs in the ledger; want as many, and %d or more", ran, len(ledger), want)
	}
	skipped := 0
	for _, r := range ledger {
		skipped += strings.Count(transcript, `skips: dlock: "gocron-example-report": slot `+r[1]+" ran on "+r[2])
	}
	if skipped == 0 {
		t.Errorf("no host skipped a slot because the other had run it")
	}
}

func checkTakeover(t *testing.T, transcript string, ticks int) {
	t.Helper()
	before, after := splitAt(t, transcript, "closes its dlock Locker")
	a, b := leads(t, before), leads(t, after)
	if len(a) < ticks {
		t.Fatalf("%d ticks before the close, want %d", len(a), ticks)
	}
	for _, l := range a {
		if l != a[0] {
			t.Errorf("before the close, %+v ran, and %+v", a[0], l)
		}
	}
	took := 0
	for _, l := range b {
		switch {
		case l.host != a[0].host && l.term > a[0].term:
			took++
		case l.host == a[0].host && took == 0: // a tick of the old term begun before the close
		default:
			t.Errorf("after %+v's Locker closed: %+v ran", a[0], l)
		}
	}
	if took < ticks {
		t.Errorf("%d ticks of a new leader after the close, want %d", took, ticks)
	}
}

type lead struct {
	host string
	term int
}

// leads lists the ticks' leaders and terms.
func leads(t *testing.T, transcript string) []lead {
	var l []lead
	for _, m := range regexp.MustCompile(`(host-[ab])\s+leads \(term (\d+)\)`).FindAllStringSubmatch(transcript, -1) {
		term, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatal(err)
		}
		l = append(l, lead{m[1], term})
	}
	return l
}

func TestBadOptions(t *testing.T) {
	for _, c := range []struct {
		o    options
		want string
	}{
		{options{slots: 0, ticks: 1}, "-slots 0"},
		{options{slots: 1, splay: 500 * time.Millisecond, ticks: 1}, "-splay 500ms"},
		{options{slots: 1, splay: -time.Millisecond, ticks: 1}, "-splay -1ms"},
		{options{slots: 1, ticks: 101}, "-ticks 101"},
	} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), c.o, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("%+v: exit %d, %q; want 2 naming %s", c.o, code, errOut.String(), c.want)
		}
	}
}

// splitAt returns s before and from the first line containing sep.
func splitAt(t *testing.T, s, sep string) (string, string) {
	t.Helper()
	i := strings.Index(s, sep)
	if i < 0 {
		t.Fatalf("no %q in:\n%s", sep, s)
	}
	i = strings.LastIndex(s[:i], "\n") + 1
	return s[:i], s[i:]
}
