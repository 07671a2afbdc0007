package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync"
	"time"
)

// TLS configures the SSL and SASL_SSL listeners.
type TLS struct {
	// CertFile and KeyFile are the broker's certificate chain and private
	// key, PEM (Kafka's ssl.keystore.*). They are read again when they
	// change, so certificates rotate without a restart.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile holds the CA certificates client certificates are
	// checked against, PEM (Kafka's ssl.truststore.*).
	ClientCAFile string `yaml:"client_ca_file"`
	// ClientAuth is Kafka's ssl.client.auth: none, requested or required.
	// On an SSL listener a verified client certificate's subject is the
	// client's principal.
	ClientAuth string `yaml:"client_auth"`
}

// ServerConfig loads the certificates into a server tls.Config.
func (t TLS) ServerConfig() (*tls.Config, error) {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: tls.%s: %s", ErrInvalid, key, fmt.Sprintf(format, args...))
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, bad("cert_file", "an SSL or SASL_SSL listener needs tls.cert_file and tls.key_file")
	}
	r, err := newCertReloader(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, bad("cert_file", "%v", err)
	}
	cfg := &tls.Config{GetCertificate: r.get, MinVersion: tls.VersionTLS12}
	switch t.ClientAuth {
	case "", "none":
		return cfg, nil
	case "requested":
		cfg.ClientAuth = tls.VerifyClientCertIfGiven
	case "required":
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	default:
		return nil, bad("client_auth", "%q is not one of none, requested, required", t.ClientAuth)
	}
	if t.ClientCAFile == "" {
		return nil, bad("client_ca_file", "client_auth %s needs the CA to check client certificates against", t.ClientAuth)
	}
	pem, err := os.ReadFile(t.ClientCAFile)
	if err != nil {
		return nil, bad("client_ca_file", "%v", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, bad("client_ca_file", "%s holds no PEM certificate", t.ClientCAFile)
	}
	cfg.ClientCAs = pool
	return cfg, nil
}

// certReloader serves a certificate and key pair, read again when either
// file changes (checked on each TLS handshake), so certificates are
// rotated without a restart. A pair that does not load (one file written,
// the other not yet) leaves the previous one in service.
type certReloader struct {
	certFile, keyFile string

	mu       sync.Mutex
	cert     *tls.Certificate
	certStat fileStamp
	keyStat  fileStamp
}

// fileStamp is what tells a file changed: modification time and size.
type fileStamp struct {
	mod  time.Time
	size int64
}

func stamp(path string) (fileStamp, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{fi.ModTime(), fi.Size()}, nil
}

func newCertReloader(certFile, keyFile string) (*certReloader, error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r, nil
}

// load reads the pair if either file changed since the last load.
func (r *certReloader) load() error {
	cs, err := stamp(r.certFile)
	if err != nil {
		return err
	}
	ks, err := stamp(r.keyFile)
	if err != nil {
		return err
	}
	if r.cert != nil && cs == r.certStat && ks == r.keyStat {
		return nil
	}
	c, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return err
	}
	r.cert, r.certStat, r.keyStat = &c, cs, ks
	return nil
}

func (r *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	_ = r.load() // on error keep serving the pair that loaded last
	return r.cert, nil
}
