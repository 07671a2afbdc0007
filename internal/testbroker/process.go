package testbroker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var build struct {
	once sync.Once
	dir  string
	bin  string
	err  error
}

// BuildBinary builds ./cmd/sluice once per test binary and returns its path.
// The binary lives in a temporary directory that Main removes.
func BuildBinary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		root, err := moduleRoot()
		if err != nil {
			build.err = err
			return
		}
		// Neither the directory nor the binary is named "sluice": on a
		// shared development machine, someone's `pkill sluice` must not
		// take down a test's broker.
		dir, err := os.MkdirTemp("", "testbroker-bin-")
		if err != nil {
			build.err = err
			return
		}
		build.dir = dir
		bin := filepath.Join(dir, "broker-under-test")
		cmd := exec.Command("go", "build", "-o", bin, "./cmd/sluice")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build ./cmd/sluice: %v\n%s", err, out)
			return
		}
		build.bin = bin
	})
	if build.err != nil {
		t.Fatalf("testbroker: building the broker: %v", build.err)
	}
	return build.bin
}

// Main runs the tests and removes the binary BuildBinary made. Use it from
// TestMain: func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	return code
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if mod == "" || mod == os.DevNull {
		return "", errors.New("not inside the sluice module")
	}
	return filepath.Dir(mod), nil
}

// Proc is a broker running as a child process.
type Proc struct {
	t         testing.TB
	bin       string
	args      []string
	dataDir   string
	readyFile string
	logPath   string
	logFile   *os.File
	cmd       *exec.Cmd
	exited    chan struct{}
	waitErr   error
	addr      string
	admin     string // admin HTTP address, from the ready file
	registry  string // schema registry address, from the ready file
	starts    int
}

// StartTimeout bounds how long a process may take to write its ready file
// (recovery included).
var StartTimeout = 2 * time.Minute

// StartProcess runs `bin serve --listen 127.0.0.1:0 --data-dir D --ready-file F
// args...` and waits until the ready file names the bound address. The
// process is stopped (SIGTERM, then SIGKILL) by t.Cleanup; its stderr and
// stdout go to a file whose tail is printed if the test fails.
func StartProcess(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	p := NewProcess(t, bin, args...)
	p.start()
	return p
}

// NewProcess is StartProcess without the start: StartAll starts it, with
// others at the same moment.
func NewProcess(t testing.TB, bin string, args ...string) *Proc {
	t.Helper()
	dir := t.TempDir()
	p := &Proc{
		t:         t,
		bin:       bin,
		args:      args,
		dataDir:   filepath.Join(dir, "data"),
		readyFile: filepath.Join(dir, "ready"),
		logPath:   filepath.Join(dir, "broker.log"),
	}
	f, err := os.Create(p.logPath)
	if err != nil {
		t.Fatalf("testbroker: creating log file: %v", err)
	}
	p.logFile = f
	t.Cleanup(func() {
		if p.running() {
			p.stop(10 * time.Second)
		}
		f.Close()
		if t.Failed() {
			dumpLog(t, "broker process", p.logPath)
		}
	})
	return p
}

// Addr is the address the running process is listening on.
func (p *Proc) Addr() string { return p.addr }

// AdminAddr is the running process's admin HTTP address ("" when off).
func (p *Proc) AdminAddr() string { return p.admin }

// RegistryAddr is the running process's schema registry address ("" when
// off).
func (p *Proc) RegistryAddr() string { return p.registry }

// DataDir is the process's data directory, kept across restarts.
func (p *Proc) DataDir() string { return p.dataDir }

// Pid is the running process's id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

func (p *Proc) running() bool {
	if p.cmd == nil {
		return false
	}
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *Proc) start() {
	p.t.Helper()
	p.launch()
	p.waitReady()
}

// launch starts the process without waiting for it to be ready.
func (p *Proc) launch() {
	p.t.Helper()
	p.starts++
	if err := os.Remove(p.readyFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		p.t.Fatalf("testbroker: removing ready file: %v", err)
	}
	args := []string{"serve",
		"--listen", "127.0.0.1:0",
		"--data-dir", p.dataDir,
		"--ready-file", p.readyFile,
	}
	if !slices.Contains(p.args, "--admin-listen") {
		// The admin listener is on by default on a fixed port: give each
		// test broker its own.
		args = append(args, "--admin-listen", "127.0.0.1:0")
	}
	if !slices.Contains(p.args, "--schema-registry-listen") {
		// So is the schema registry's.
		args = append(args, "--schema-registry-listen", "127.0.0.1:0")
	}
	args = append(args, p.args...)
	fmt.Fprintf(p.logFile, "=== testbroker: start #%d: %s %s\n", p.starts, p.bin, strings.Join(args, " "))
	cmd := exec.Command(p.bin, args...)
	cmd.Stdout = p.logFile
	cmd.Stderr = p.logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("testbroker: starting %s: %v", p.bin, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
}

// waitReady waits until the started process has written its ready file.
func (p *Proc) waitReady() {
	p.t.Helper()
	cmd := p.cmd
	deadline := time.Now().Add(StartTimeout)
	for {
		b, err := os.ReadFile(p.readyFile)
		if err == nil && bytes.HasSuffix(b, []byte("\n")) {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			p.addr, p.admin, p.registry = strings.TrimSpace(lines[0]), "", ""
			for _, l := range lines[1:] {
				if a, ok := strings.CutPrefix(l, "admin "); ok {
					p.admin = strings.TrimSpace(a)
				}
				if a, ok := strings.CutPrefix(l, "registry "); ok {
					p.registry = strings.TrimSpace(a)
				}
			}
			fmt.Fprintf(p.logFile, "=== testbroker: ready at %s (pid %d)\n", p.addr, cmd.Process.Pid)
			return
		}
		select {
		case <-p.exited:
			p.t.Fatalf("testbroker: broker exited before it was ready: %v\n%s", p.waitErr, tail(p.logPath, 4096))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.cmd.Process.Kill()
			<-p.exited
			p.t.Fatalf("testbroker: broker not ready after %v\n%s", StartTimeout, tail(p.logPath, 4096))
		}
	}
}

// Kill sends SIGKILL and waits for the process to be gone.
func (p *Proc) Kill() {
	p.t.Helper()
	if !p.running() {
		p.t.Fatalf("testbroker: Kill: broker is not running (exit: %v)", p.waitErr)
	}
	fmt.Fprintf(p.logFile, "=== testbroker: SIGKILL pid %d\n", p.cmd.Process.Pid)
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("testbroker: SIGKILL: %v", err)
	}
	<-p.exited
}

// Stop sends SIGTERM and waits for a graceful exit. A non-zero exit, or no
// exit within a minute, fails the test.
func (p *Proc) Stop() {
	p.t.Helper()
	if !p.running() {
		p.t.Fatalf("testbroker: Stop: broker is not running (exit: %v)", p.waitErr)
	}
	p.stop(time.Minute)
}

func (p *Proc) stop(grace time.Duration) {
	p.t.Helper()
	fmt.Fprintf(p.logFile, "=== testbroker: SIGTERM pid %d\n", p.cmd.Process.Pid)
	p.cmd.Process.Signal(syscall.SIGTERM)
	// A paused process (Pause) handles SIGTERM only once it runs again.
	p.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-p.exited:
		if p.waitErr != nil {
			p.t.Errorf("testbroker: broker exited uncleanly after SIGTERM: %v", p.waitErr)
		}
	case <-time.After(grace):
		p.cmd.Process.Kill()
		<-p.exited
		p.t.Errorf("testbroker: broker did not exit within %v of SIGTERM; killed", grace)
	}
}

// Restart starts the broker again on the same data directory and flags,
// after Kill or Stop (or stops it gracefully first if it is running). The
// new address is read from the ready file.
func (p *Proc) Restart() {
	p.t.Helper()
	if p.running() {
		p.Stop()
	}
	p.start()
}

// StartAll starts every one of procs at the same moment (each stopped or
// killed before), then waits until all are ready: a whole cluster coming
// back at once, rather than one broker after another.
func StartAll(procs ...*Proc) {
	for _, p := range procs {
		p.t.Helper()
		if p.running() {
			p.t.Fatalf("testbroker: StartAll: broker is running")
		}
	}
	// Launched back to back: each launch only forks.
	for _, p := range procs {
		p.launch()
	}
	for _, p := range procs {
		p.waitReady()
	}
}

// Pause freezes the process with SIGSTOP, as a hung machine or a very
// long stall would: the kernel still accepts connections, nothing answers,
// and its etcd lease runs out. It returns once the process is stopped
// (SIGSTOP takes effect asynchronously).
func (p *Proc) Pause() {
	p.t.Helper()
	p.signal(syscall.SIGSTOP)
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return // no /proc: the caller sees whatever happens
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume undoes Pause (SIGCONT).
func (p *Proc) Resume() {
	p.t.Helper()
	p.signal(syscall.SIGCONT)
}

func (p *Proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if !p.running() {
		p.t.Fatalf("testbroker: %v: broker is not running (exit: %v)", sig, p.waitErr)
	}
	fmt.Fprintf(p.logFile, "=== testbroker: %v pid %d\n", sig, p.cmd.Process.Pid)
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("testbroker: %v: %v", sig, err)
	}
}

// LogPath is the file the process's output goes to, across restarts.
func (p *Proc) LogPath() string { return p.logPath }

// Exited reports whether the process has exited and, if so, how.
func (p *Proc) Exited() (bool, error) {
	select {
	case <-p.exited:
		return true, p.waitErr
	default:
		return false, nil
	}
}

// dumpLogBytes bounds what a failing test prints of a broker log.
const dumpLogBytes = 32 << 10

func dumpLog(t testing.TB, what, path string) {
	t.Logf("---- %s log (%s), last %d bytes ----\n%s\n---- end of broker log ----", what, path, dumpLogBytes, tail(path, dumpLogBytes))
}

func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err.Error()
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	buf := make([]byte, st.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil {
		return err.Error()
	}
	if off > 0 {
		if i := bytes.IndexByte(buf, '\n'); i >= 0 {
			buf = buf[i+1:]
		}
	}
	return string(buf)
}
