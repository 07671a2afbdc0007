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

// TestUserAndACLCommands: "sluice user" creates a user who then logs in
// through the SASL listener, lists and deletes users; "sluice acl" creates,
// lists and deletes ACLs that the authorizer then applies.
func TestUserAndACLCommands(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ANONYMOUS"}}
	}))
	admin, saslAddr := b.Addr(), b.Server().ListenerAddr(config.SASLPlaintext)
	t.Setenv(UserPasswordEnv, "carol-secret")
	mustRun(t, admin, "", "user", "create", "carol")
	if out := mustRun(t, admin, "", "user", "list"); !strings.Contains(out, "carol") || !strings.Contains(out, "SCRAM-SHA-512(4096)") {
		t.Errorf("user list:\n%s", out)
	}
	mustRun(t, admin, "", "topic", "create", "cli-acl-orders", "--partitions", "1")
	carol := []string{"--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "carol", "--sasl-password", "carol-secret"}
	// No ACL yet: carol may not write.
	r := run(t, saslAddr, "x\n", append([]string{"produce", "cli-acl-orders"}, carol...)...)
	if r.err == nil {
		t.Fatal("carol produced without an ACL")
	}
	out := mustRun(t, admin, "", "acl", "create", "--allow", "User:carol", "--operation", "write,read,describe,idempotent_write",
		"--topic", "cli-acl-", "--prefixed")
	if !strings.Contains(out, "PREFIXED") || !strings.Contains(out, "WRITE") {
		t.Errorf("acl create printed:\n%s", out)
	}
	mustRun(t, admin, "", "acl", "create", "--allow", "User:carol", "--operation", "idempotent_write", "--cluster")
	mustRun(t, saslAddr, "hello\n", append([]string{"produce", "cli-acl-orders"}, carol...)...)
	if out := mustRun(t, admin, "", "acl", "list", "--allow", "User:carol"); strings.Count(out, "User:carol") != 5 {
		t.Errorf("acl list for carol:\n%s", out)
	}
	if out := mustRun(t, admin, "", "acl", "delete", "--allow", "User:carol", "--topic", "cli-acl-", "--prefixed"); strings.Count(out, "User:carol") != 4 {
		t.Errorf("acl delete printed:\n%s", out)
	}
	mustRun(t, admin, "", "user", "delete", "carol")
	if out := mustRun(t, admin, "", "user", "list"); strings.Contains(out, "carol") {
		t.Errorf("carol still listed:\n%s", out)
	}
	wantErr(t, run(t, admin, "", "acl", "create", "--allow", "User:x", "--operation", "fly", "--topic", "t"), ErrBadFlag, "fly")
	wantErr(t, run(t, admin, "", "user", "create", "dave", "--password", ""), ErrBadFlag, "password")
}
