package config

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// TLS configures the SSL and SASL_SSL listeners.
type TLS struct {
	// CertFile and KeyFile are the broker's certificate chain and private
	// key, PEM (Kafka's ssl.keystore.*).
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
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, bad("cert_file", "%v", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
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
