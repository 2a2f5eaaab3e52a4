package testserver

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// EnvSkips names the file where every test skipped for a missing server
// binary is recorded, one line each (make test sets it to a fresh file and
// prints Summary of it at the end), so that a run without the servers does
// not end green in silence. Unset, nothing is recorded.
const EnvSkips = "DLOCK_TEST_SKIPS"

// InstallCommand installs every server the tests start on a fresh Debian
// machine, then runs make test.
const InstallCommand = "sudo bash .ci/run"

// skipMissing skips t because missing (a binary or a file) is not
// installed, after recording it in the EnvSkips file.
func skipMissing(t testing.TB, missing, msg string) {
	t.Helper()
	if err := recordSkip(os.Getenv(EnvSkips), missing, pkgName(), t.Name()); err != nil {
		msg += fmt.Sprintf("; and the skip could not be recorded in $%s: %v", EnvSkips, err)
	}
	t.Skipf("%s", msg)
}

// recordSkip appends one line "missing<TAB>package<TAB>test" to file;
// "" records nothing. A single short write in append mode, so that the
// packages' test processes and parallel tests do not interleave lines.
func recordSkip(file, missing, pkg, test string) error {
	if file == "" {
		return nil
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	line := strings.Join([]string{clean(missing), clean(pkg), clean(test)}, "\t") + "\n"
	_, err = f.WriteString(line)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// clean keeps a field on its line and in its column.
func clean(s string) string {
	return strings.NewReplacer("\t", " ", "\n", " ").Replace(s)
}

// pkgName is the package under test, from the test binary's name
// ("redislock.test" → "redislock").
func pkgName() string {
	return strings.TrimSuffix(filepath.Base(os.Args[0]), ".test")
}

// Summary writes what the records in file say was not tested: per missing
// binary, how many tests skipped and in which packages, then the command
// that installs the servers. It writes nothing when nothing was skipped
// (or file does not exist).
func Summary(w io.Writer, file string) error {
	f, err := os.Open(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	tests := map[string]map[string]bool{} // missing → "package test"
	pkgs := map[string]map[string]bool{}  // missing → package
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		c := strings.Split(sc.Text(), "\t")
		if len(c) != 3 {
			continue
		}
		if tests[c[0]] == nil {
			tests[c[0]], pkgs[c[0]] = map[string]bool{}, map[string]bool{}
		}
		tests[c[0]][c[1]+" "+c[2]] = true
		pkgs[c[0]][c[1]] = true
	}
	if err := sc.Err(); err != nil || len(tests) == 0 {
		return err
	}
	fmt.Fprintln(w, "NOT TESTED: these tests skipped because a server or tool they need is not installed:")
	for _, m := range sortedKeys(tests) {
		fmt.Fprintf(w, "  %s missing: %s skipped in %s\n", m, plural(len(tests[m]), "test"), strings.Join(sortedKeys(pkgs[m]), ", "))
	}
	_, err = fmt.Fprintf(w, "A green run says nothing about them. To install the servers (Debian) and run make test again:\n  %s\n", InstallCommand)
	return err
}

// plural is "1 test", "2 tests".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
