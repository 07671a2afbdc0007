package cli

import (
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestSASLFlags: with --sasl-mechanism/--sasl-user and the password from
// SLUICE_SASL_PASSWORD, the commands work through a SASL_PLAINTEXT
// listener; a wrong password or a bad mechanism is a clear error.
func TestSASLFlags(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret"}
	}))
	addr := b.Server().ListenerAddr(config.SASLPlaintext)
	t.Setenv(SASLPasswordEnv, "ops-secret")
	for _, mech := range []string{"PLAIN", "scram-sha-256", "SCRAM-SHA-512"} {
		auth := []string{"--sasl-mechanism", mech, "--sasl-user", "ops"}
		topic := "cli-sasl-" + strings.ToLower(mech)
		mustRun(t, addr, "", append([]string{"topic", "create", topic, "--partitions", "1"}, auth...)...)
		mustRun(t, addr, "hello\n", append([]string{"produce", topic}, auth...)...)
		out := mustRun(t, addr, "", append([]string{"consume", topic, "--offset", "earliest"}, auth...)...)
		if !strings.Contains(out, "hello") {
			t.Errorf("%s: consumed %q", mech, out)
		}
	}
	r := run(t, addr, "", "topic", "list", "--sasl-mechanism", "PLAIN", "--sasl-user", "ops", "--sasl-password", "wrong")
	wantErr(t, r, nil, "SASL_AUTHENTICATION_FAILED")
	r = run(t, addr, "", "topic", "list", "--sasl-mechanism", "GSSAPI", "--sasl-user", "ops")
	wantErr(t, r, ErrBadFlag, "GSSAPI")
	r = run(t, addr, "", "topic", "list", "--tls-ca", "/nonexistent.pem")
	wantErr(t, r, ErrBadFlag, "tls-ca")
}

// TestTLSFlags: --tls-ca makes the commands work through an SSL listener;
// --tls-cert/--tls-key present a client certificate where one is
// required; without the CA the connection fails.
func TestTLSFlags(t *testing.T) {
	p := testbroker.NewPKI(t)
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"}
		c.TLS = config.TLS{CertFile: p.CertFile, KeyFile: p.KeyFile, ClientCAFile: p.CAFile, ClientAuth: "required"}
	}))
	addr := b.Server().ListenerAddr(config.SSL)
	tlsArgs := []string{"--tls-ca", p.CAFile, "--tls-cert", p.ClientCertFile, "--tls-key", p.ClientKeyFile}
	mustRun(t, addr, "", append([]string{"topic", "create", "cli-tls", "--partitions", "1"}, tlsArgs...)...)
	mustRun(t, addr, "over tls\n", append([]string{"produce", "cli-tls"}, tlsArgs...)...)
	if out := mustRun(t, addr, "", append([]string{"consume", "cli-tls"}, tlsArgs...)...); !strings.Contains(out, "over tls") {
		t.Errorf("consumed %q", out)
	}
	// Without a client certificate a listener requiring one refuses.
	if r := run(t, addr, "", "topic", "list", "--tls-ca", p.CAFile); r.err == nil {
		t.Error("topic list without a client certificate succeeded")
	}
}
