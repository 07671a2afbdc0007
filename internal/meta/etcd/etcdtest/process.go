package etcdtest

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// StartProcess is Start with etcd in a child process (cmd etcdproc, built
// once per test binary) instead of in the test process, so that Pause can
// stop it as a long GC or a VM stall would. Stop, Start and Restart work
// as for an embedded server.
func StartProcess(tb testing.TB) *Server {
	tb.Helper()
	bin := procBinary(tb)
	s := &Server{bin: bin}
	var err error
	for range 5 {
		s.dir, s.clientURL, s.peerURL = tb.TempDir(), UnusedURL(tb), UnusedURL(tb)
		if err = s.start(); err == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("etcdtest: %v", err)
	return nil
}

var procBuild struct {
	once sync.Once
	bin  string
	err  error
}

// procBinary builds etcdproc into the temporary directory, under a name
// derived from the module root so that runs from one checkout reuse (and
// incrementally rebuild) the same file.
func procBinary(tb testing.TB) string {
	tb.Helper()
	procBuild.once.Do(func() {
		out, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			procBuild.err = err
			return
		}
		root := filepath.Dir(strings.TrimSpace(string(out)))
		h := sha256.Sum256([]byte(root))
		bin := filepath.Join(os.TempDir(), "etcdtest-proc-"+hex.EncodeToString(h[:6]))
		cmd := exec.Command("go", "build", "-o", bin, "./internal/meta/etcd/etcdtest/etcdproc")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			procBuild.err = fmt.Errorf("go build etcdproc: %v\n%s", err, out)
			return
		}
		procBuild.bin = bin
	})
	if procBuild.err != nil {
		tb.Fatalf("etcdtest: %v", procBuild.err)
	}
	return procBuild.bin
}

// startProc runs the child and waits for its "ready". s.mu is held.
func (s *Server) startProc() error {
	cmd := exec.Command(s.bin, "-dir", s.dir, "-client", s.clientURL.String(), "-peer", s.peerURL.String())
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		ok := sc.Scan() && sc.Text() == "ready"
		ready <- ok
		for sc.Scan() {
		}
	}()
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	select {
	case ok := <-ready:
		if ok {
			s.cmd, s.exited = cmd, exited
			return nil
		}
	case <-time.After(30 * time.Second):
	}
	cmd.Process.Kill()
	<-exited
	return fmt.Errorf("etcd process on %s did not start: %s", s.Endpoint(), stderr.String())
}

// stopProc ends the child gracefully (SIGTERM, SIGCONT in case it is
// paused), killing it after 30 s. s.mu is held.
func (s *Server) stopProc() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	s.cmd.Process.Signal(syscall.SIGCONT)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
	s.cmd, s.exited = nil, nil
}

// Kill ends a process server with SIGKILL, as a crash would: no graceful
// shutdown, so no client stream is drained and nothing expires on the way
// down (a graceful Stop waits up to about 5 s for open streams, with its
// leases still running out). Start brings it back on the same data.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		tb.Fatalf("etcdtest: Kill: not a running process server")
	}
	s.cmd.Process.Kill()
	<-s.exited
	s.cmd, s.exited = nil, nil
}

// Pause stops a process server with SIGSTOP and returns once it is
// stopped: its connections stay open and nothing answers, as in a long GC
// pause or a VM stall. It fails tb for an embedded server.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGSTOP)
	pid := s.cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// Resume continues a paused process server.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.signal(tb, syscall.SIGCONT)
}

func (s *Server) signal(tb testing.TB, sig syscall.Signal) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		tb.Fatalf("etcdtest: %v: not a running process server", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		tb.Fatalf("etcdtest: %v: %v", sig, err)
	}
}

// Pid is the process server's process id (for its CPU time and memory),
// 0 for an embedded or stopped server.
func (s *Server) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}
