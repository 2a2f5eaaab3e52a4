package cli

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/dlockdev/dlock/driver"
	"github.com/dlockdev/dlock/internal/testing/testserver"
)

// TestDoctorFileBackend: a file backend on the local disk passes, one line
// per check, exit 0.
func TestDoctorFileBackend(t *testing.T) {
	url := fileURL(t)
	r := runBin(t, nil, "--url", url, "doctor")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if len(lines) != 4 {
		t.Fatalf("want 4 lines, got %q", r.stdout)
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "ok ") {
			t.Errorf("line %q is not ok", l)
		}
	}
	if !strings.Contains(r.stdout, "file system: "+strings.TrimPrefix(url, "file://")) {
		t.Errorf("the file system line does not name the database: %q", r.stdout)
	}
}

// TestDoctorJSON: --json prints one document with the findings and the
// counts of unsafe and warn verdicts.
func TestDoctorJSON(t *testing.T) {
	url := fileURL(t)
	r := runBin(t, nil, "--url", url+"?sync=full", "doctor", "--json")
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	var doc struct {
		URL      string            `json:"url"`
		Checks   *bool             `json:"checks"`
		Findings []json.RawMessage `json:"findings"`
		Unsafe   *int              `json:"unsafe"`
		Warn     *int              `json:"warn"`
	}
	dec := json.NewDecoder(strings.NewReader(r.stdout))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&doc); err != nil || dec.More() {
		t.Fatalf("not one JSON document (%v): %s", err, r.stdout)
	}
	if doc.URL != url+"?sync=full" || doc.Checks == nil || !*doc.Checks || doc.Unsafe == nil || *doc.Unsafe != 0 || doc.Warn == nil || len(doc.Findings) != 4 {
		t.Fatalf("unexpected document: %s", r.stdout)
	}
	for _, raw := range doc.Findings {
		var f map[string]string
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if f["check"] == "" || f["verdict"] != "ok" || f["detail"] == "" {
			t.Errorf("finding %s lacks check, verdict ok or detail", raw)
		}
	}
}

// TestDoctorOutcomes: without checks exit 0; unreachable exit 1 without
// the password; an operand is usage (2).
func TestDoctorOutcomes(t *testing.T) {
	closed := testserver.FreePort(t)
	for _, tc := range []struct {
		name, url string
		args      []string
		code      int
		out       string
	}{
		{"no checks", "mem://doctor", nil, 0, "offers no deployment checks"},
		{"unreachable redis", fmt.Sprintf("redis://:pw-doc@127.0.0.1:%d", closed), nil, ExitError, ""},
		{"unreachable postgres", fmt.Sprintf("postgres://u:pw-doc@127.0.0.1:%d/db", closed), nil, ExitError, ""},
		{"operand", "mem://doctor", []string{"extra"}, ExitUsage, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBin(t, nil, append([]string{"--url", tc.url, "doctor"}, tc.args...)...)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d: %s %s", r.code, tc.code, r.stdout, r.stderr)
			}
			if !strings.Contains(r.stdout, tc.out) {
				t.Errorf("stdout %q lacks %q", r.stdout, tc.out)
			}
			if tc.code != 0 {
				assertOneLine(t, r, tc.name)
			}
			if strings.Contains(r.stdout+r.stderr, "pw-doc") {
				t.Errorf("the password leaked")
			}
		})
	}
}

// TestWriteDoctorVerdicts: any unsafe finding exits 3 and says so; warnings
// alone exit 0; fixes are printed for what is not ok.
func TestWriteDoctorVerdicts(t *testing.T) {
	ok := driver.Finding{Check: "a", Verdict: driver.VerdictOK, Detail: "fine", Fix: "never shown"}
	warn := driver.Finding{Check: "b", Verdict: driver.VerdictWarn, Detail: "meh", Fix: "do W"}
	unsafe := driver.Finding{Check: "c", Verdict: driver.VerdictUnsafe, Detail: "bad", Fix: "do U"}
	for _, tc := range []struct {
		name     string
		fs       []driver.Finding
		code     int
		contains []string
	}{
		{"all ok", []driver.Finding{ok}, 0, []string{"ok     a: fine\n"}},
		{"warn only", []driver.Finding{ok, warn}, 0, []string{"warn   b: meh (fix: do W)"}},
		{"unsafe", []driver.Finding{ok, warn, unsafe}, ExitUnsafe, []string{"unsafe c: bad (fix: do U)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			std, out, _ := testIO()
			err := writeDoctor(std, &doctorOptions{}, doctorReport{URL: "x://", Checks: true, Findings: tc.fs})
			if codeOf(err) != tc.code {
				t.Fatalf("exit %d (%v), want %d", codeOf(err), err, tc.code)
			}
			for _, s := range tc.contains {
				if !strings.Contains(out.String(), s) {
					t.Errorf("output %q lacks %q", out.String(), s)
				}
			}
			if strings.Contains(out.String(), "never shown") {
				t.Errorf("a fix was printed for an ok finding: %q", out.String())
			}
			std, out, _ = testIO()
			_ = writeDoctor(std, &doctorOptions{JSON: true}, doctorReport{URL: "x://", Checks: true, Findings: tc.fs})
			var rep doctorReport
			if err := json.Unmarshal([]byte(out.String()), &rep); err != nil {
				t.Fatal(err)
			}
			if (rep.Unsafe > 0) != (tc.code == ExitUnsafe) || len(rep.Findings) != len(tc.fs) {
				t.Errorf("JSON counts wrong: %+v", rep)
			}
		})
	}
}
