package testbroker

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Python is the Debian interpreter, which has the Debian client packages
// (python3-confluent-kafka, python3-kafka); the python3 first on PATH may be
// another one without them.
const Python = "/usr/bin/python3"

// NeedTool returns the path of an external client a test drives (a name
// looked up on PATH, or a path). A missing tool fails the test
// (scripts/install-test-deps.sh installs them all), unless
// SLUICE_SKIP_MISSING_TOOLS=1 asks for a skip on a machine where installing
// is not possible.
func NeedTool(t testing.TB, name string) string {
	t.Helper()
	if strings.Contains(name, "/") {
		if _, err := os.Stat(name); err != nil {
			MissingTool(t, name+" is not installed")
		}
		return name
	}
	p, err := exec.LookPath(name)
	if err != nil {
		MissingTool(t, name+" is not installed")
	}
	return p
}

// MissingTool fails the test for what is missing, or skips it with
// SLUICE_SKIP_MISSING_TOOLS=1.
func MissingTool(t testing.TB, what string) {
	t.Helper()
	if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
		t.Skipf("%s (SLUICE_SKIP_MISSING_TOOLS=1)", what)
	}
	t.Fatalf("%s: run scripts/install-test-deps.sh as root (or set SLUICE_SKIP_MISSING_TOOLS=1 to skip)", what)
}

// NeedPythonModule checks that the Debian interpreter can import module
// (from Debian package pkg), as NeedTool checks a tool.
func NeedPythonModule(t testing.TB, module, pkg string) {
	t.Helper()
	NeedTool(t, Python)
	if out, err := exec.Command(Python, "-c", "import "+module).CombinedOutput(); err != nil {
		MissingTool(t, "python module "+module+" (Debian package "+pkg+") is not importable: "+strings.TrimSpace(string(out)))
	}
}

// RunTool runs a command with stdin, bounded in time, and returns its
// stdout. A non-zero exit or the timeout fails the test with its output.
func RunTool(t testing.TB, stdin []byte, timeout time.Duration, name string, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = bytes.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("%s %s: timed out after %v\nstderr:\n%s\nstdout:\n%s", name, strings.Join(args, " "), timeout, Clip(stderr.String()), Clip(stdout.String()))
	}
	if err != nil {
		t.Fatalf("%s %s: %v\nstderr:\n%s\nstdout:\n%s", name, strings.Join(args, " "), err, Clip(stderr.String()), Clip(stdout.String()))
	}
	return stdout.Bytes()
}

// Clip shortens a tool's output for a test log: its first and last 4,000
// bytes.
func Clip(s string) string {
	if len(s) > 8000 {
		return s[:4000] + "\n...\n" + s[len(s)-4000:]
	}
	return s
}
