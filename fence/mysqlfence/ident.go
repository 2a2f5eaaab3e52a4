package mysqlfence

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/dlockdev/dlock"
)

// maxIdent is MySQL's and MariaDB's limit on a table, column or trigger
// name, in characters.
const maxIdent = 64

// ident quotes a possibly schema-qualified identifier ("billing.accounts")
// with backticks. Backticks quote under every sql_mode (ANSI_QUOTES only
// adds double quotes), and a backslash means nothing inside them.
func ident(name string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty SQL identifier", dlock.ErrInvalidArgument)
	}
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("%w: SQL identifier %q: at most one dot (schema.table)", dlock.ErrInvalidArgument, name)
	}
	quoted := make([]string, len(parts))
	for i, p := range parts {
		if err := checkPart(p); err != nil {
			return "", fmt.Errorf("%w: SQL identifier %q: %s", dlock.ErrInvalidArgument, name, err)
		}
		quoted[i] = "`" + strings.ReplaceAll(p, "`", "``") + "`"
	}
	return strings.Join(quoted, "."), nil
}

// checkPart applies the server's rules for one name, so a bad name is
// refused here with its value rather than by the server.
func checkPart(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty part")
	case !utf8.ValidString(p):
		return fmt.Errorf("not valid UTF-8")
	case utf8.RuneCountInString(p) > maxIdent:
		return fmt.Errorf("longer than %d characters", maxIdent)
	case strings.HasSuffix(p, " "):
		return fmt.Errorf("ends with a space")
	}
	for _, r := range p {
		if r == 0 || r > 0xFFFF {
			return fmt.Errorf("character %U is not allowed in a name", r)
		}
	}
	return nil
}

// splitSchema returns the schema part of a qualified name ("" if none)
// and the table's own name.
func splitSchema(name string) (schema, table string) {
	if s, t, ok := strings.Cut(name, "."); ok {
		return s, t
	}
	return "", name
}
