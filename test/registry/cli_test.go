package registry

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestSchemaCLIExitStatus runs the built sluice binary's `schema check`
// against a broker's registry: exit status 0 when the schema is
// compatible, 1 with the reasons on standard output when it is not, and 1
// with the registry's error on standard error for an unknown subject.
func TestSchemaCLIExitStatus(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	b := testbroker.Start(t)
	dir := t.TempDir()
	for name, text := range map[string]string{"v1.avsc": userV1, "v2.avsc": userV2, "bad.avsc": userBad} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	sluice := func(args ...string) (stdout, stderr string, status int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"schema"}, args...)...)
		cmd.Env = append(os.Environ(), "SLUICE_SCHEMA_REGISTRY="+b.RegistryAddr())
		var out, errOut strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var ee *exec.ExitError
		switch {
		case errors.As(err, &ee):
			status = ee.ExitCode()
		case err != nil:
			t.Fatalf("running sluice schema %v: %v", args, err)
		}
		return out.String(), errOut.String(), status
	}
	if out, errOut, st := sluice("register", "cli-value", "--file", filepath.Join(dir, "v1.avsc")); st != 0 || out != "subject cli-value version 1 id 1\n" {
		t.Fatalf("register: status %d, %q, %q", st, out, errOut)
	}
	if out, errOut, st := sluice("check", "cli-value", "--file", filepath.Join(dir, "v2.avsc")); st != 0 || out != "compatible with cli-value\n" {
		t.Fatalf("check v2: status %d, %q, %q", st, out, errOut)
	}
	out, errOut, st := sluice("check", "cli-value", "--file", filepath.Join(dir, "bad.avsc"))
	if st != 1 || !strings.HasPrefix(out, "incompatible with cli-value:\n  - backward") || !strings.Contains(out, `"age"`) ||
		errOut != "sluice: schema is incompatible with subject cli-value\n" {
		t.Fatalf("check bad: status %d, stdout %q, stderr %q", st, out, errOut)
	}
	if _, errOut, st := sluice("show", "nobody-value"); st != 1 || !strings.Contains(errOut, "(error 40401)") {
		t.Fatalf("show an unknown subject: status %d, stderr %q", st, errOut)
	}
}
