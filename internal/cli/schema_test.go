package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// Avro schemas of one record: v2 adds a field with a default (BACKWARD
// compatible), v3 another; bad adds one without a default (not).
const (
	cliUserV1  = `{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"}]}`
	cliUserV2  = `{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""}]}`
	cliUserV3  = `{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""},{"name":"tz","type":"string","default":"UTC"}]}`
	cliUserBad = `{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}`
)

// schemaFiles writes name -> text into a temporary directory and returns
// the directory.
func schemaFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSchemaCommand drives `sluice schema` against the real broker's
// registry: register two compatible Avro versions, list, show, versions,
// diff (the added field is an added line), check (an incompatible schema
// is an error with the reason), config and mode, delete.
func TestSchemaCommand(t *testing.T) {
	b := testbroker.Start(t)
	reg := "--registry=" + b.RegistryAddr()
	dir := schemaFiles(t, map[string]string{
		"v1.avsc": cliUserV1, "v2.avsc": cliUserV2, "v3.avsc": cliUserV3, "bad.avsc": cliUserBad,
		"address.proto": "syntax = \"proto3\";\npackage acme;\nmessage Address { string city = 1; }\n",
		"user.proto":    "syntax = \"proto3\";\npackage acme;\nimport \"acme/address.proto\";\nmessage User { Address home = 1; }\n",
		"empty.avsc":    "  \n",
	})
	file := func(name string) string { return filepath.Join(dir, name) }
	sh := func(args ...string) string {
		t.Helper()
		return mustRun(t, "", "", append([]string{"schema", reg}, args...)...)
	}
	fails := func(args ...string) result {
		t.Helper()
		return run(t, "", "", append([]string{"schema", reg}, args...)...)
	}

	// Register: v1, v2, and v1 again (the same id and version).
	if out := sh("register", "users-value", "--file", file("v1.avsc")); out != "subject users-value version 1 id 1\n" {
		t.Fatalf("register v1: %q", out)
	}
	if out := sh("register", "users-value", "-f", file("v2.avsc")); out != "subject users-value version 2 id 2\n" {
		t.Fatalf("register v2: %q", out)
	}
	if out := sh("register", "users-value", "--file", file("v1.avsc"), "--json"); !strings.Contains(out, `"version": 1`) || !strings.Contains(out, `"id": 1`) {
		t.Fatalf("register v1 again: %q", out)
	}
	// Protobuf, inferred from .proto, with a reference to the latest version.
	sh("register", "address", "--file", file("address.proto"))
	if out := sh("register", "pusers-value", "--file", file("user.proto"), "--reference", "acme/address.proto=address:latest"); out != "subject pusers-value version 1 id 4\n" {
		t.Fatalf("register with a reference: %q", out)
	}

	out := sh("list")
	for _, want := range [][]string{{"SUBJECT", "LATEST", "ID", "TYPE"}, {"address", "1", "3", "PROTOBUF"},
		{"pusers-value", "1", "4", "PROTOBUF"}, {"users-value", "2", "2", "AVRO"}} {
		if got := tableRow(out, want[0]); strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("list: row %v, want %v:\n%s", got, want, out)
		}
	}

	out = sh("show", "users-value")
	for _, want := range []string{"subject:    users-value\n", "version:    2\n", "id:         2\n", "type:       AVRO\n",
		"\n{\n  \"type\": \"record\",\n", "      \"name\": \"email\",\n"} {
		if !strings.Contains(out, want) {
			t.Fatalf("show lacks %q:\n%s", want, out)
		}
	}
	if out := sh("show", "users-value", "1", "--raw"); out != cliUserV1 {
		t.Fatalf("show --raw: %q", out)
	}
	if out := sh("show", "--id", "1"); !strings.Contains(out, "used by:    users-value version 1\n") {
		t.Fatalf("show --id 1:\n%s", out)
	}
	if out := sh("show", "pusers-value"); !strings.Contains(out, "reference:  acme/address.proto = address version 1\n") ||
		!strings.Contains(out, "message User { Address home = 1; }") {
		t.Fatalf("show pusers-value:\n%s", out)
	}

	out = sh("versions", "users-value")
	if r1, r2 := tableRow(out, "1"), tableRow(out, "2"); strings.Join(r1, " ") != "1 1 AVRO -" || strings.Join(r2, " ") != "2 2 AVRO -" {
		t.Fatalf("versions:\n%s", out)
	}

	// The diff is only the added field.
	out = sh("diff", "users-value", "1", "latest")
	if !strings.HasPrefix(out, "--- users-value version 1 (id 1, AVRO)\n+++ users-value version 2 (id 2, AVRO)\n@@ ") {
		t.Fatalf("diff header:\n%s", out)
	}
	var added []string
	for _, l := range strings.Split(out, "\n") {
		switch {
		case strings.HasPrefix(l, "+++"), strings.HasPrefix(l, "---"):
		case strings.HasPrefix(l, "-"):
			t.Fatalf("diff removes a line %q:\n%s", l, out)
		case strings.HasPrefix(l, "+"):
			added = append(added, strings.TrimSpace(l[1:]))
		}
	}
	if strings.Join(added, " ") != `}, { "name": "email", "type": "string", "default": ""` {
		t.Fatalf("diff adds %q:\n%s", added, out)
	}
	if out := sh("diff", "users-value", "2", "2"); !strings.HasPrefix(out, "no difference") {
		t.Fatalf("diff of a version with itself:\n%s", out)
	}

	// Compatibility.
	r := fails("check", "users-value", "--file", file("bad.avsc"))
	if !errors.Is(r.err, ErrIncompatible) || !strings.Contains(r.stdout, "incompatible with users-value:\n  - backward") ||
		!strings.Contains(r.stdout, "age") {
		t.Fatalf("check bad: %v\n%s", r.err, r.stdout)
	}
	if out := sh("check", "users-value", "--file", file("v3.avsc"), "--verbose"); out !=
		"subject users-value, compatibility level BACKWARD, checked against the versions its compatibility level checks\ncompatible with users-value\n" {
		t.Fatalf("check v3: %q", out)
	}
	if out := sh("check", "users-value", "--file", file("v3.avsc"), "--version", "1", "--json"); !strings.Contains(out, `"is_compatible": true`) {
		t.Fatalf("check v3 --version 1 --json: %q", out)
	}
	if out := sh("check", "fresh-value", "--file", file("bad.avsc")); out != "compatible with fresh-value\n" {
		t.Fatalf("check against a subject without versions: %q", out)
	}

	// Config and mode.
	if out := sh("config"); out != "global BACKWARD\n" {
		t.Fatalf("config: %q", out)
	}
	if out := sh("config", "users-value"); out != "users-value BACKWARD (the global config: the subject has none of its own)\n" {
		t.Fatalf("config users-value: %q", out)
	}
	if out := sh("config", "users-value", "--set", "none"); out != "users-value config set to NONE\n" {
		t.Fatalf("config --set: %q", out)
	}
	if out := sh("config", "users-value"); out != "users-value NONE\n" {
		t.Fatalf("config users-value after --set: %q", out)
	}
	sh("check", "users-value", "--file", file("bad.avsc")) // NONE: anything goes
	wantErr(t, fails("config", "--set", "SOMETIMES"), ErrBadFlag, "SOMETIMES")
	if out := sh("config", "users-value", "--reset"); out != "users-value config NONE removed\n" {
		t.Fatalf("config --reset: %q", out)
	}
	if out := sh("mode", "users-value", "--set", "readonly"); out != "users-value mode set to READONLY\n" {
		t.Fatalf("mode --set: %q", out)
	}
	wantErr(t, fails("register", "users-value", "--file", file("v3.avsc")), nil, "42205")
	sh("mode", "users-value", "--reset")
	if out := sh("mode", "users-value", "--json"); !strings.Contains(out, `"inherited": true`) || !strings.Contains(out, `"mode": "READWRITE"`) {
		t.Fatalf("mode --json: %q", out)
	}

	// Delete: one version soft, then the subject for good.
	if out := sh("delete", "users-value", "2"); out != "users-value soft-deleted: version(s) 2\n" {
		t.Fatalf("delete version 2: %q", out)
	}
	if out := sh("versions", "users-value"); tableRow(out, "2") != nil {
		t.Fatalf("versions after a soft delete:\n%s", out)
	}
	if out := sh("versions", "users-value", "--deleted"); tableRow(out, "2") == nil {
		t.Fatalf("versions --deleted:\n%s", out)
	}
	if out := sh("delete", "users-value", "--permanent"); out != "users-value deleted permanently: version(s) 1,2\n" {
		t.Fatalf("delete --permanent: %q", out)
	}
	if out := sh("list", "--deleted"); tableRow(out, "users-value") != nil {
		t.Fatalf("list --deleted after a permanent delete:\n%s", out)
	}

	// Errors are sentences with the registry's code.
	wantErr(t, fails("show", "nobody"), nil, "(error 40401)")
	wantErr(t, fails("show", "pusers-value", "7"), nil, "(error 40402)")
	wantErr(t, fails("show", "--id", "99"), nil, "(error 40403)")
	wantErr(t, fails("show", "pusers-value", "zero"), ErrBadFlag, "zero")
	wantErr(t, fails("register", "x-value", "--file", file("empty.avsc")), ErrBadFlag, "empty")
	wantErr(t, fails("register", "x-value", "--file", file("missing.avsc")), ErrBadFlag, "missing.avsc")
	wantErr(t, fails("register", "x-value", "--file", file("v1.avsc"), "--type", "XML"), ErrBadFlag, "XML")
	wantErr(t, fails("register", "x-value", "--file", file("v1.avsc"), "--reference", "nameonly"), ErrBadFlag, "name=subject:version")
	wantErr(t, fails("register", "x-value", "--file", file("bad.avsc"), "--type", "PROTOBUF"), nil, "(error 42201)")
	wantErr(t, run(t, "", "", "schema", "list", "--registry", "127.0.0.1:1"), nil, "reaching the schema registry at http://127.0.0.1:1")

	// The registry's address from the environment; stdin as the file. Id 1
	// went with the permanent delete and is never handed out again.
	t.Setenv(RegistryEnv, b.RegistryAddr())
	if out := mustRun(t, "", cliUserV1, "schema", "register", "env-value", "--file", "-"); out != "subject env-value version 1 id 5\n" {
		t.Fatalf("register from stdin via %s: %q", RegistryEnv, out)
	}
}

// TestSchemaCommandSASL: with a SASL broker the registry wants HTTP Basic;
// the command takes --sasl-user and SLUICE_SASL_PASSWORD, like the others.
// With the authorizer on, a user without ACLs on the subject's topic is
// refused, in words with the registry's code.
func TestSchemaCommandSASL(t *testing.T) {
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SASL_PLAINTEXT://127.0.0.1:0"}
		c.SASL.Users = []string{"ops:ops-secret", "bob:bob-secret"}
		c.Authorizer = config.Authorizer{Enabled: true, SuperUsers: []string{"User:ops", "User:ANONYMOUS"}}
	}))
	reg := "--registry=" + b.RegistryAddr()
	wantErr(t, run(t, "", "", "schema", "list", reg), nil, "(error 401)")
	wantErr(t, run(t, "", "", "schema", "list", reg, "--sasl-user", "ops", "--sasl-password", "wrong"), nil, "(error 401)")
	t.Setenv(SASLPasswordEnv, "ops-secret")
	if out := mustRun(t, "", cliUserV1, "schema", "register", "s-value", "--file", "-", reg, "--sasl-user", "ops"); out != "subject s-value version 1 id 1\n" {
		t.Fatalf("register as ops: %q", out)
	}
	wantErr(t, run(t, "", cliUserV1, "schema", "register", "s-value", "--file", "-", reg, "--sasl-user", "bob", "--sasl-password", "bob-secret"),
		nil, "User User:bob is denied operation WRITE on TOPIC s (error 40301)")
	if out := mustRun(t, "", "", "schema", "list", reg, "--sasl-user", "bob", "--sasl-password", "bob-secret"); tableRow(out, "s-value") != nil {
		t.Fatalf("bob lists a subject he may not read:\n%s", out)
	}
}

// TestSchemaCommandTLS: a TLS broker's registry speaks https; --tls-ca
// trusts its certificate.
func TestSchemaCommandTLS(t *testing.T) {
	p := testbroker.NewPKI(t)
	b := testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.Listeners = []string{"PLAINTEXT://127.0.0.1:0", "SSL://127.0.0.1:0"}
		c.TLS = config.TLS{CertFile: p.CertFile, KeyFile: p.KeyFile}
	}))
	wantErr(t, run(t, "", "", "schema", "list", "--registry", "https://"+b.RegistryAddr()), nil, "certificate")
	out := mustRun(t, "", cliUserV1, "schema", "register", "tls-value", "--file", "-", "--registry", b.RegistryAddr(), "--tls-ca", p.CAFile)
	if out != "subject tls-value version 1 id 1\n" {
		t.Fatalf("register over https: %q", out)
	}
}
