// Package testcert makes TLS certificates for tests: a CA, and leaf
// certificates it signs, valid for 127.0.0.1 as server and as client.
package testcert

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Cert is one certificate and its key.
type Cert struct {
	X509 *x509.Certificate
	Key  *ecdsa.PrivateKey
	// TLS is the pair for a tls.Config's Certificates.
	TLS tls.Certificate
	der []byte
}

// New makes a certificate for cn, valid for an hour, signed by parent (nil:
// self-signed). isCA makes it a CA that can sign others.
func New(t testing.TB, cn string, parent *Cert, isCA bool) *Cert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: isCA, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.X509, parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &Cert{X509: c, Key: key, TLS: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, der: der}
}

// WritePEM writes the certificate and its key as PEM files named after
// base in dir, and returns their paths.
func (c *Cert) WritePEM(t testing.TB, dir, base string) (certFile, keyFile string) {
	t.Helper()
	kder, err := x509.MarshalECPrivateKey(c.Key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, base+".pem"), filepath.Join(dir, base+".key")
	for path, b := range map[string]*pem.Block{certFile: {Type: "CERTIFICATE", Bytes: c.der}, keyFile: {Type: "EC PRIVATE KEY", Bytes: kder}} {
		if err := os.WriteFile(path, pem.EncodeToMemory(b), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return certFile, keyFile
}
