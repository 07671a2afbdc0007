// Package s3test runs a real S3-compatible server for tests: versitygw
// (Apache-2.0) with its posix backend in a temporary directory, on
// 127.0.0.1 with an ephemeral port. scripts/install-versitygw.sh builds the
// binary. Tests of the s3 backend use it, and so can cluster tests.
//
// It owns the server process (start, SIGKILL, restart on the same port and
// data, SIGSTOP/SIGCONT) and nothing about sluice.
package s3test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/objstore/s3"
)

// Root credentials of every server started here.
const (
	AccessKey = "sluice-test"
	SecretKey = "sluice-test-secret-key"
	Region    = "us-east-1"
)

// Binary returns the path of versitygw: $SLUICE_TOOLS_BIN/versitygw,
// $(go env GOPATH)/bin/versitygw (where scripts/install-versitygw.sh puts
// it), or versitygw on PATH. A missing binary fails t with an install hint,
// or skips it when SLUICE_SKIP_MISSING_TOOLS=1.
func Binary(t testing.TB) string {
	t.Helper()
	var candidates []string
	if dir := os.Getenv("SLUICE_TOOLS_BIN"); dir != "" {
		candidates = append(candidates, filepath.Join(dir, "versitygw"))
	}
	if gopath := goPath(); gopath != "" {
		candidates = append(candidates, filepath.Join(gopath, "bin", "versitygw"))
	}
	for _, c := range candidates {
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() {
			return c
		}
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	what := fmt.Sprintf("versitygw (the S3-compatible test server) is not installed (looked in %s and PATH)", strings.Join(candidates, ", "))
	if os.Getenv("SLUICE_SKIP_MISSING_TOOLS") == "1" {
		t.Skipf("%s (SLUICE_SKIP_MISSING_TOOLS=1)", what)
	}
	t.Fatalf("%s: run scripts/install-versitygw.sh (or scripts/install-test-deps.sh; no root needed), or set SLUICE_SKIP_MISSING_TOOLS=1 to skip", what)
	return ""
}

var goPath = sync.OnceValue(func() string {
	out, err := exec.Command("go", "env", "GOPATH").Output()
	if err != nil {
		return ""
	}
	// GOPATH may list several directories; go install uses the first.
	return strings.SplitN(strings.TrimSpace(string(out)), string(os.PathListSeparator), 2)[0]
})

// Option configures Start.
type Option func(*Server)

// WithVirtualDomain makes the server accept virtual-host style requests
// for buckets under domain (bucket.domain:port).
func WithVirtualDomain(domain string) Option {
	return func(s *Server) { s.vdomain = domain }
}

// WithKeepAlive keeps connections open between requests, as S3 services
// do; without it versitygw closes each connection after one request, and
// each PUT pays a new TCP connection. The cluster tests use it. The store's
// own suite does not: on a kept-alive connection versitygw can leave part
// of a streamed (unsized, aws-chunked) upload that failed midway unread and
// answer the rest as a malformed next request. sluice's brokers only send
// sized, seekable bodies.
func WithKeepAlive() Option {
	return func(s *Server) { s.keepAlive = true }
}

// WithPosixFlags adds flags of versitygw's posix backend (after "posix",
// before the root directory), e.g. "--nometa".
func WithPosixFlags(flags ...string) Option {
	return func(s *Server) { s.posixFlags = append(s.posixFlags, flags...) }
}

// Server is one versitygw process. Stop, Start, Pause and Resume are for
// failure tests; they are not safe for concurrent use.
type Server struct {
	t       testing.TB
	bin     string
	dir     string // posix backend root: one directory per bucket
	addr    string // 127.0.0.1:port, kept across restarts
	vdomain string
	// keepAlive: see WithKeepAlive.
	keepAlive  bool
	posixFlags []string
	cmd        *exec.Cmd
	done       chan struct{}
	log        *lockedBuffer
}

// Start starts a server and stops it when the test ends.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := &Server{t: t, bin: Binary(t), dir: t.TempDir(), log: &lockedBuffer{}}
	for _, o := range opts {
		o(s)
	}
	t.Cleanup(func() {
		s.kill()
		if t.Failed() {
			t.Logf("versitygw output:\n%s", s.log.String())
		}
	})
	// An ephemeral port, picked by the kernel and released for the server.
	// Retry if someone takes it in between.
	for attempt := 0; ; attempt++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("s3test: pick a port: %v", err)
		}
		s.addr = l.Addr().String()
		l.Close()
		err = s.start()
		if err == nil {
			return s
		}
		if attempt == 4 {
			t.Fatalf("s3test: %v\n%s", err, s.log.String())
		}
	}
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return s.addr }

// Pid is the running server's process id, 0 when it is stopped.
func (s *Server) Pid() int {
	if s.cmd == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// Dir is the posix backend's root (one directory per bucket).
func (s *Server) Dir() string { return s.dir }

// Config returns an s3.Config for bucket on this server: path style, root
// credentials, CreateBucket set.
func (s *Server) Config(bucket string) s3.Config {
	c := s3.DefaultConfig()
	c.Endpoint = s.addr
	c.Bucket = bucket
	c.Region = Region
	c.AccessKey = AccessKey
	c.SecretKey = SecretKey
	c.Addressing = s3.AddressingPath
	c.CreateBucket = true
	return c
}

// Stop kills the server with SIGKILL, as a crash would. Data in Dir stays.
func (s *Server) Stop() {
	s.t.Helper()
	s.kill()
}

// Restart starts the server again on the same port and data.
func (s *Server) Restart() {
	s.t.Helper()
	// The port was ours a moment ago; another process could grab it in
	// between, so retry briefly before giving up.
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("s3test: restart on %s: %v\n%s", s.addr, err, s.log.String())
}

// Pause freezes the server (SIGSTOP): connections are accepted by the
// kernel but nothing answers, as with a hung service. It returns once
// the process is stopped.
func (s *Server) Pause() {
	s.signal(syscall.SIGSTOP)
	waitStopped(s.cmd.Process.Pid)
}

// Resume undoes Pause.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.t.Helper()
	if s.cmd == nil {
		s.t.Fatalf("s3test: %v: server not running", sig)
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("s3test: %v: %v", sig, err)
	}
}

const healthPath = "/sluice-health"

func (s *Server) start() error {
	if s.cmd != nil {
		return fmt.Errorf("already running")
	}
	args := []string{"--port", s.addr, "--access", AccessKey, "--secret", SecretKey,
		"--region", Region, "--health", healthPath, "--quiet"}
	if s.keepAlive {
		args = append(args, "--keep-alive")
	}
	if s.vdomain != "" {
		args = append(args, "--virtual-domain", s.vdomain)
	}
	args = append(args, "posix")
	args = append(args, s.posixFlags...)
	args = append(args, s.dir)
	cmd := exec.Command(s.bin, args...)
	// versitygw reads ROOT_ACCESS_KEY and friends from the environment too;
	// give it only what it needs so the caller's variables cannot leak in.
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + s.dir}
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	cmd.SysProcAttr = procAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(15 * time.Second)
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{Proxy: nil}}
	defer client.CloseIdleConnections()
	for {
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("versitygw on %s exited at start: %v", s.addr, cmd.ProcessState)
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+s.addr+healthPath, nil)
		resp, err := client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.kill()
			return fmt.Errorf("versitygw on %s did not answer %s within 15s (last: %v)", s.addr, healthPath, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Server) kill() {
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGCONT) // a paused process must run to die cleanly
	_ = s.cmd.Process.Kill()
	<-s.done
	s.cmd, s.done = nil, nil
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.b.Len() > 1<<20 {
		return len(p), nil // enough to debug with
	}
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
