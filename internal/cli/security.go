package cli

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// Connection security flags, shared by every command. The password is
// best given as SLUICE_SASL_PASSWORD: flags show in ps.
const (
	saslMechanismFlag = "sasl-mechanism"
	saslUserFlag      = "sasl-user"
	saslPasswordFlag  = "sasl-password"
	tlsFlag           = "tls"
	tlsCAFlag         = "tls-ca"
	tlsCertFlag       = "tls-cert"
	tlsKeyFlag        = "tls-key"

	// SASLPasswordEnv is read when --sasl-password is not given.
	SASLPasswordEnv = "SLUICE_SASL_PASSWORD"
)

func addSecurityFlags(c *cobra.Command) {
	f := c.PersistentFlags()
	f.String(saslMechanismFlag, "", "SASL mechanism: PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512 (empty: no SASL)")
	f.String(saslUserFlag, "", "SASL user")
	f.String(saslPasswordFlag, "", "SASL password (env "+SASLPasswordEnv+" when the flag is not set)")
	addTLSFlags(f, "brokers")
}

// addTLSFlags adds the flags tlsConfig reads; peer names what the client
// talks to, in their usage.
func addTLSFlags(f *pflag.FlagSet, peer string) {
	f.Bool(tlsFlag, false, "connect with TLS (implied by --tls-ca and --tls-cert)")
	f.String(tlsCAFlag, "", "PEM file of the CA that signed the "+peer+"' certificates (default: the system's)")
	f.String(tlsCertFlag, "", "PEM client certificate, for "+peer+" that check them")
	f.String(tlsKeyFlag, "", "PEM key of --tls-cert")
}

// securityOpts turns the security flags into client options.
func securityOpts(cmd *cobra.Command) ([]kgo.Opt, error) {
	f := cmd.Flags()
	get := func(name string) string { v, _ := f.GetString(name); return v }
	var opts []kgo.Opt
	mech, user, pass := strings.ToUpper(get(saslMechanismFlag)), get(saslUserFlag), get(saslPasswordFlag)
	if !f.Changed(saslPasswordFlag) {
		pass = os.Getenv(SASLPasswordEnv)
	}
	switch mech {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("%w: --%s %q is not PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512", ErrBadFlag, saslMechanismFlag, mech)
	}
	if mech != "" && user == "" {
		return nil, fmt.Errorf("%w: --%s needs --%s", ErrBadFlag, saslMechanismFlag, saslUserFlag)
	}
	cfg, err := tlsConfig(cmd)
	if err != nil || cfg == nil {
		return opts, err
	}
	return append(opts, kgo.DialTLSConfig(cfg)), nil
}

// tlsConfig is the client TLS configuration the --tls flags ask for; nil
// when they ask for none.
func tlsConfig(cmd *cobra.Command) (*tls.Config, error) {
	f := cmd.Flags()
	get := func(name string) string { v, _ := f.GetString(name); return v }
	useTLS, _ := f.GetBool(tlsFlag)
	ca, cert, key := get(tlsCAFlag), get(tlsCertFlag), get(tlsKeyFlag)
	if !useTLS && ca == "" && cert == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("%w: --%s: %v", ErrBadFlag, tlsCAFlag, err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: --%s: %s holds no PEM certificate", ErrBadFlag, tlsCAFlag, ca)
		}
	}
	if cert != "" || key != "" {
		c, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return nil, fmt.Errorf("%w: --%s/--%s: %v", ErrBadFlag, tlsCertFlag, tlsKeyFlag, err)
		}
		cfg.Certificates = []tls.Certificate{c}
	}
	return cfg, nil
}
