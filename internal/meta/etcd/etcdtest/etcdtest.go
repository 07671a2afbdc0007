// Package etcdtest runs a real etcd for tests: go.etcd.io/etcd/server/v3/embed
// inside the test process, on 127.0.0.1 with free ports and a temporary data
// directory. Clients, in process or in child processes, reach it over TCP at
// Endpoint.
//
// It owns the server's lifecycle (start, stop, start again on the same ports
// and data) and nothing about sluice. It imports only etcd's server packages,
// so the tests of internal/meta/etcd itself can use it.
package etcdtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Server is one embedded etcd member. Stop, Start and Restart are for
// failure tests; Endpoint is safe to call at any time.
type Server struct {
	dir       string
	clientURL url.URL
	peerURL   url.URL

	mu sync.Mutex
	e  *embed.Etcd

	// Process mode (StartProcess).
	bin    string
	cmd    *exec.Cmd
	exited chan struct{}
}

// Start starts a server and stops it when the test ends.
func Start(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{}
	// Free ports are picked and released before etcd binds them, so another
	// process can take one in between: then try again on new ports and a
	// fresh directory.
	var err error
	for range 5 {
		s.dir, s.clientURL, s.peerURL = tb.TempDir(), UnusedURL(tb), UnusedURL(tb)
		if err = s.start(); err == nil {
			// Registered after TempDir, so it runs first: etcd stops
			// before its directory is removed. (The other way round, a
			// running etcd found its directory gone and exited the test
			// process.)
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("etcdtest: %v", err)
	return nil
}

// Endpoint is the client URL, "http://127.0.0.1:port"; it stays the same
// across restarts.
func (s *Server) Endpoint() string { return s.clientURL.String() }

// Dir is the data directory, kept across restarts.
func (s *Server) Dir() string { return s.dir }

// Stop closes the server, as an etcd shutdown does: open client streams are
// cut, after waiting up to etcd's request timeout (about 5 s) for them. Data
// stays. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
	if s.cmd != nil {
		s.stopProc()
	}
}

// Start starts a stopped server again on the same ports and data directory
// and waits until it serves.
func (s *Server) Start(tb testing.TB) {
	tb.Helper()
	// The ports were ours a moment ago; a connection in TIME_WAIT or another
	// process could hold one briefly, so retry before giving up.
	var err error
	for range 50 {
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	tb.Fatalf("etcdtest: restart on %s: %v", s.Endpoint(), err)
}

// Restart is Stop then Start.
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.Stop()
	s.Start(tb)
}

func (s *Server) start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.e != nil || s.cmd != nil {
		return fmt.Errorf("already running on %s", s.Endpoint())
	}
	if s.bin != "" {
		return s.startProc()
	}
	cfg := EmbedConfig(s.dir, s.clientURL, s.peerURL)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return fmt.Errorf("start etcd on %s: %w", s.Endpoint(), err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("etcd on %s failed: %w", s.Endpoint(), err)
	case <-time.After(30 * time.Second):
		e.Close()
		return fmt.Errorf("etcd on %s not ready after 30s", s.Endpoint())
	}
	s.e = e
	return nil
}

// EmbedConfig is the configuration of every test etcd: one member named
// sluice-test over dir, fast ticks, quiet logs.
func EmbedConfig(dir string, clientURL, peerURL url.URL) *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = "sluice-test"
	cfg.Dir = dir
	cfg.ListenClientUrls = []url.URL{clientURL}
	cfg.AdvertiseClientUrls = []url.URL{clientURL}
	cfg.ListenPeerUrls = []url.URL{peerURL}
	cfg.AdvertisePeerUrls = []url.URL{peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	// No purging of old snapshot and WAL files: a test's etcd is short-lived,
	// and a purge that fails is fatal to the whole process.
	cfg.MaxSnapFiles, cfg.MaxWalFiles = 0, 0
	cfg.LogLevel = "error"
	// Only DPanic and above reach stderr: etcd's zap Fatal exits the test
	// process (os.Exit(1), even from a Nop logger), and its message is then
	// the only clue.
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.New(zapcore.NewCore(
		zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.Lock(os.Stderr), zapcore.DPanicLevel)))
	// Fast ticks: a quick election at start and a 1 s minimum lease TTL
	// (etcd's minimum is 1.5 election timeouts, rounded up to seconds).
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	return cfg
}

// UnusedURL returns http://127.0.0.1:port for a port that was free a moment
// ago: for a server to listen on, or as an endpoint where nothing answers.
func UnusedURL(tb testing.TB) url.URL {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("etcdtest: pick a port: %v", err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
