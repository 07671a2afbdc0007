package testbroker

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/server"
)

// Option adjusts the configuration of an in-process broker.
type Option func(*config.Config)

// WithConfig applies fn to the configuration before the broker starts.
func WithConfig(fn func(*config.Config)) Option { return Option(fn) }

// WithAutoCreateTopics turns topic auto-creation on or off.
func WithAutoCreateTopics(on bool) Option {
	return func(c *config.Config) { c.AutoCreateTopics = on }
}

// WithTopicDefaults sets broker-level topic config defaults
// ("max.message.bytes", "retention.ms", ...).
func WithTopicDefaults(kv map[string]string) Option {
	return func(c *config.Config) {
		if c.TopicDefaults == nil {
			c.TopicDefaults = map[string]string{}
		}
		for k, v := range kv {
			c.TopicDefaults[k] = v
		}
	}
}

// WithRetentionCheckInterval sets how often retention and compaction run.
func WithRetentionCheckInterval(d time.Duration) Option {
	return func(c *config.Config) { c.RetentionCheckInterval = d }
}

// WithWALSegmentBytes sets the WAL roll size.
func WithWALSegmentBytes(n int64) Option {
	return func(c *config.Config) { c.WALSegmentBytes = n }
}

// WithFlush sets the WAL flush mode ("batch", "messages", "interval", "os").
func WithFlush(mode string) Option {
	return func(c *config.Config) { c.Flush.Mode = mode }
}

// Broker is an in-process broker.
type Broker struct {
	t       testing.TB
	cfg     config.Config
	srv     *server.Server
	logPath string
	logFile *os.File
	closed  bool
}

// Start starts an in-process broker on 127.0.0.1 with an ephemeral port and
// a fresh data directory. It is closed by t.Cleanup.
func Start(t testing.TB, opts ...Option) *Broker {
	t.Helper()
	dir := t.TempDir() // registered first, so removed after the broker closes
	cfg := config.Default()
	cfg.Listen = "127.0.0.1:0"
	cfg.AdminListen = "127.0.0.1:0"
	cfg.SchemaRegistry.Listen = "127.0.0.1:0"
	cfg.DataDir = filepath.Join(dir, "data")
	cfg.LogLevel = "debug"
	cfg.RetentionCheckInterval = time.Second
	for _, o := range opts {
		o(&cfg)
	}
	b := &Broker{t: t, cfg: cfg, logPath: filepath.Join(dir, "broker.log")}
	f, err := os.Create(b.logPath)
	if err != nil {
		t.Fatalf("testbroker: creating log file: %v", err)
	}
	b.logFile = f
	t.Cleanup(func() {
		b.Close()
		f.Close()
		if t.Failed() {
			dumpLog(t, "in-process broker "+b.addrOrEmpty(), b.logPath)
		}
	})
	if err := b.start(); err != nil {
		t.Fatalf("testbroker: starting broker: %v", err)
	}
	return b
}

func (b *Broker) start() error {
	logger := slog.New(slog.NewTextHandler(b.logFile, &slog.HandlerOptions{Level: level(b.cfg.LogLevel)}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := server.Start(ctx, b.cfg, logger)
	if err != nil {
		return err
	}
	b.srv = srv
	b.closed = false
	return nil
}

func level(s string) slog.Level {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return slog.LevelInfo
	}
	return l
}

// Addr is the broker's Kafka address (host:port).
func (b *Broker) Addr() string { return b.srv.Addr() }

// AdminAddr is the admin HTTP listener's address ("" when configured off).
func (b *Broker) AdminAddr() string { return b.srv.AdminAddr() }

// RegistryAddr is the schema registry listener's address ("" when off).
func (b *Broker) RegistryAddr() string { return b.srv.RegistryAddr() }

func (b *Broker) addrOrEmpty() string {
	if b.srv == nil {
		return ""
	}
	return b.srv.Addr()
}

// Config is the configuration the broker was started with.
func (b *Broker) Config() config.Config { return b.cfg }

// Server is the running server.
func (b *Broker) Server() *server.Server { return b.srv }

// DataDir is the broker's data directory.
func (b *Broker) DataDir() string { return b.cfg.DataDir }

// Close shuts the broker down gracefully. It is safe to call more than once;
// an error from Server.Close fails the test.
func (b *Broker) Close() {
	b.t.Helper()
	if b.closed || b.srv == nil {
		return
	}
	b.closed = true
	if err := b.srv.Close(); err != nil {
		b.t.Errorf("testbroker: closing broker: %v", err)
	}
}

// Restart closes the broker gracefully and starts it again on the same data
// directory. The address changes (a new ephemeral port).
func (b *Broker) Restart() {
	b.t.Helper()
	b.Close()
	cfg := b.cfg
	cfg.Listen = "127.0.0.1:0"
	b.cfg = cfg
	if err := b.start(); err != nil {
		b.t.Fatalf("testbroker: restarting broker: %v", err)
	}
}

// Client returns a franz-go client seeded with the broker's address, closed
// by t.Cleanup.
func (b *Broker) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	return NewClient(t, b.Addr(), opts...)
}

// Admin returns a kadm client over a new franz-go client.
func (b *Broker) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(b.Client(t))
}

// NewClient returns a franz-go client for addr, closed by t.Cleanup.
func NewClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl := newClient(t, addr, opts...)
	t.Cleanup(cl.Close)
	return cl
}

// newClient is NewClient for callers that close the client themselves
// (helpers called in polling loops must not pile clients up until cleanup).
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ClientID("sluice-test")}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatalf("testbroker: new client: %v", err)
	}
	return cl
}
