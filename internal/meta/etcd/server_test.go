package etcd

import (
	"net"
	"net/url"
	"testing"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// server is a real etcd, embedded in the test process on 127.0.0.1, that
// can be stopped and started again on the same ports and data directory.
type server struct {
	dir       string
	clientURL url.URL
	peerURL   url.URL
	e         *embed.Etcd
}

func startServer(tb testing.TB) *server {
	tb.Helper()
	s := &server{dir: tb.TempDir(), clientURL: freeURL(tb), peerURL: freeURL(tb)}
	s.start(tb)
	tb.Cleanup(s.stop)
	return s
}

func (s *server) endpoint() string { return s.clientURL.String() }

func (s *server) start(tb testing.TB) {
	tb.Helper()
	cfg := embed.NewConfig()
	cfg.Name = "sluice-test"
	cfg.Dir = s.dir
	cfg.ListenClientUrls = []url.URL{s.clientURL}
	cfg.AdvertiseClientUrls = []url.URL{s.clientURL}
	cfg.ListenPeerUrls = []url.URL{s.peerURL}
	cfg.AdvertisePeerUrls = []url.URL{s.peerURL}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	// Fast ticks: a quick election at start and a 1 s minimum lease TTL
	// (etcd's minimum is 1.5 election timeouts, rounded up to seconds).
	cfg.TickMs = 10
	cfg.ElectionMs = 100
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		tb.Fatalf("start etcd: %v", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		tb.Fatalf("etcd failed: %v", err)
	case <-time.After(30 * time.Second):
		e.Close()
		tb.Fatal("etcd not ready after 30s")
	}
	s.e = e
}

func (s *server) stop() {
	if s.e != nil {
		s.e.Close()
		s.e = nil
	}
}

// freeURL picks a free port. Another process could take it before etcd
// listens on it; on 127.0.0.1 in a test run that does not happen in practice.
func freeURL(tb testing.TB) url.URL {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	defer l.Close()
	return url.URL{Scheme: "http", Host: l.Addr().String()}
}
