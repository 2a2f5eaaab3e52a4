package cli

import (
	"bytes"
	"strings"
	"testing"
)

// TestLsSaysWhenNothingIsHeld: an empty listing says so on stderr and
// leaves stdout empty for scripts.
func TestLsSaysWhenNothingIsHeld(t *testing.T) {
	var out, errOut bytes.Buffer
	url := "mem://ls-empty"
	if err := runLs(t.Context(), &lsOptions{URL: url}, &IO{Out: &out, Err: &errOut}); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 || !strings.Contains(errOut.String(), "no locks held") {
		t.Errorf("stdout %q, stderr %q; want no rows and \"no locks held\"", out.String(), errOut.String())
	}
}
