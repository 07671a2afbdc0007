package compat

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// needTool returns the path of an external client the tests drive. A missing
// tool fails the test (scripts/install-test-deps.sh installs them all), unless
// SLUICE_SKIP_MISSING_TOOLS=1 asks for a skip on a machine where installing
// is not possible.
func needTool(t testing.TB, name string) string {
	t.Helper()
	path := name
	if !strings.Contains(name, "/") {
		p, err := exec.LookPath(name)
		if err != nil {
			missing(t, name+" is not installed")
		}
		path = p
	} else if _, err := os.Stat(name); err != nil {
		missing(t, name+" is not installed")
	}
	return path
}

func missing(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
		t.Skipf("%s (SLUICE_SKIP_MISSING_TOOLS=1)", what)
	}
	t.Fatalf("%s: run scripts/install-test-deps.sh as root (or set SLUICE_SKIP_MISSING_TOOLS=1 to skip)", what)
}

// python is the Debian interpreter, which has the Debian client packages;
// the python3 first on PATH may be another one without them.
const python = "/usr/bin/python3"

// needPythonModule checks that the Debian interpreter can import module.
func needPythonModule(t testing.TB, module, pkg string) {
	t.Helper()
	needTool(t, python)
	if out, err := exec.Command(python, "-c", "import "+module).CombinedOutput(); err != nil {
		missing(t, "python module "+module+" (Debian package "+pkg+") is not importable: "+strings.TrimSpace(string(out)))
	}
}

// run runs a command with stdin, bounded in time, and returns its stdout. A
// non-zero exit fails the test with stderr.
func run(t testing.TB, stdin []byte, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %v\nstderr:\n%s\nstdout:\n%s", name, strings.Join(args, " "), timeout, clip(stderr.String()), clip(stdout.String()))
	}
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s\nstdout:\n%s", name, strings.Join(args, " "), err, clip(stderr.String()), clip(stdout.String()))
	}
	return stdout.Bytes()
}

func clip(s string) string {
	if len(s) > 8000 {
		return s[:4000] + "\n...\n" + s[len(s)-4000:]
	}
	return s
}
