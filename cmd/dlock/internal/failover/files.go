package failover

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
)

// files are what every replica reads at start: the same tokens and the
// same lease keys, so that any replica serves any client and any lease.
type files struct {
	tokens, admins, leaseKeys string // paths
	clientTokens              []string
	adminToken                string
}

// writeFiles writes n client tokens, one admin token and one lease key
// (64 hex characters, as `openssl rand -hex 32` makes) into dir. Each
// client of the harness has a token of its own, because a replica bounds
// each token's request rate.
func writeFiles(dir string, n int) (files, error) {
	f := files{
		tokens:     filepath.Join(dir, "tokens.txt"),
		admins:     filepath.Join(dir, "admin.txt"),
		leaseKeys:  filepath.Join(dir, "lease-keys.txt"),
		adminToken: randomHex(),
	}
	for range n {
		f.clientTokens = append(f.clientTokens, randomHex())
	}
	for path, lines := range map[string][]string{
		f.tokens: f.clientTokens, f.admins: {f.adminToken}, f.leaseKeys: {randomHex()},
	} {
		if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			return f, err
		}
	}
	return f, nil
}

// randomHex is 32 random bytes in hex.
func randomHex() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
