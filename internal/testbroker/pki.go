package testbroker

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

// PKI is a CA with a server certificate for 127.0.0.1/localhost and a
// client certificate (CN=alice,O=sluice-test), written as PEM files, for
// tests of TLS listeners.
type PKI struct {
	CAFile, CertFile, KeyFile, ClientCertFile, ClientKeyFile string
	Pool                                                     *x509.CertPool // holds the CA
	Client                                                   tls.Certificate
}

// NewPKI makes a PKI in a temporary directory of t.
func NewPKI(t testing.TB) *PKI {
	t.Helper()
	dir := t.TempDir()
	p := &PKI{CAFile: filepath.Join(dir, "ca.pem"), CertFile: filepath.Join(dir, "server.pem"),
		KeyFile: filepath.Join(dir, "server-key.pem"), ClientCertFile: filepath.Join(dir, "client.pem"),
		ClientKeyFile: filepath.Join(dir, "client-key.pem")}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sluice test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	p.Pool = x509.NewCertPool()
	p.Pool.AddCert(ca)
	writePEM(t, p.CAFile, "CERTIFICATE", caDER)
	issue := func(serial int64, subject pkix.Name, usage x509.ExtKeyUsage, certFile, keyFile string) tls.Certificate {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: subject,
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		writePEM(t, certFile, "CERTIFICATE", der)
		writePEM(t, keyFile, "EC PRIVATE KEY", kder)
		c, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	issue(2, pkix.Name{CommonName: "localhost"}, x509.ExtKeyUsageServerAuth, p.CertFile, p.KeyFile)
	p.Client = issue(3, pkix.Name{CommonName: "alice", Organization: []string{"sluice-test"}}, x509.ExtKeyUsageClientAuth, p.ClientCertFile, p.ClientKeyFile)
	return p
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}
