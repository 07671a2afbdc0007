package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValid(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestValidateNamesTheKey(t *testing.T) {
	cases := []struct {
		key string
		mod func(*Config)
	}{
		{"listen", func(c *Config) { c.Listen = "nope" }},
		{"advertised_addr", func(c *Config) { c.AdvertisedAddr = "host:99999" }},
		{"data_dir", func(c *Config) { c.DataDir = "" }},
		{"default_partitions", func(c *Config) { c.DefaultPartitions = 0 }},
		{"flush.mode", func(c *Config) { c.Flush.Mode = "sometimes" }},
		{"flush.interval", func(c *Config) { c.Flush.Mode = "interval"; c.Flush.Interval = 0 }},
		{"max_request_bytes", func(c *Config) { c.MaxRequestBytes = 10 }},
		{"queued_max_request_bytes", func(c *Config) { c.QueuedMaxRequestBytes = -2 }},
		{"wal_segment_bytes", func(c *Config) { c.WALSegmentBytes = 4096 }},
		{"decompress_budget_bytes", func(c *Config) { c.DecompressBudgetBytes = 1 << 20 }},
		{"cleaner_dedupe_buffer_bytes", func(c *Config) { c.CleanerDedupeBufferBytes = 1000 }},
		{"memory_budget_mb", func(c *Config) { c.MemoryBudgetMB = 100 }},
		{"memory_limit_mb", func(c *Config) { c.MemoryLimitMB = -5 }},
		{"queued_max_request_bytes", func(c *Config) { c.QueuedMaxRequestBytes = 4096 }},
		{"max_connections", func(c *Config) { c.MaxConnections = -1 }},
		{"max_connections_per_ip", func(c *Config) { c.MaxConnectionsPerIP = -5 }},
		{"connections_max_idle", func(c *Config) { c.ConnectionsMaxIdle = -time.Second }},
		{"connections_max_idle", func(c *Config) { c.ConnectionsMaxIdle = time.Millisecond }},
		{"request_read_timeout", func(c *Config) { c.RequestReadTimeout = -time.Second }},
		{"topic_defaults.retention.ms", func(c *Config) { c.TopicDefaults = map[string]string{"retention.ms": "soon"} }},
		{"topic_defaults.bogus.key", func(c *Config) { c.TopicDefaults = map[string]string{"bogus.key": "1"} }},
		{"log_level", func(c *Config) { c.LogLevel = "loud" }},
		{"min_free_bytes", func(c *Config) { c.MinFreeBytes = 0 }},
		{"min_free_bytes", func(c *Config) { c.MinFreeBytes = -2 }},
		{"governance.topic_name_pattern", func(c *Config) { c.Governance.TopicNamePattern = "(" }},
		{"governance.schema_required", func(c *Config) { c.Governance.SchemaRequired = []string{`^ok$`, "[a-"} }},
	}
	for _, tc := range cases {
		t.Run(tc.key, func(t *testing.T) {
			c := Default()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key) {
				t.Fatalf("want an ErrInvalid naming %q, got %v", tc.key, err)
			}
		})
	}
}

// TestNetworkLimitKeys: the network limits load from the environment like
// every key, and their off values (-1, 0) are valid.
func TestNetworkLimitKeys(t *testing.T) {
	c := Default()
	err := c.LoadEnv([]string{"SLUICE_QUEUED_MAX_REQUEST_BYTES=-1", "SLUICE_MAX_CONNECTIONS=0", "SLUICE_MAX_CONNECTIONS_PER_IP=20",
		"SLUICE_CONNECTIONS_MAX_IDLE=0s", "SLUICE_REQUEST_READ_TIMEOUT=5s"})
	if err != nil {
		t.Fatal(err)
	}
	if c.QueuedMaxRequestBytes != -1 || c.MaxConnections != 0 || c.MaxConnectionsPerIP != 20 ||
		c.ConnectionsMaxIdle != 0 || c.RequestReadTimeout != 5*time.Second {
		t.Fatalf("network limits loaded wrong: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestLayers(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "sluice.yaml")
	os.WriteFile(file, []byte("listen: 127.0.0.1:1111\ndata_dir: /from/file\nflush:\n  mode: interval\n  interval: 20ms\n"), 0o644)
	c := Default()
	if err := c.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadEnv([]string{"SLUICE_DATA_DIR=/from/env", "SLUICE_FLUSH_MESSAGES=7", "SLUICE_BROKERS=ignored:1", "SLUICE_TOPIC_DEFAULTS=retention.ms=5,max.message.bytes=100"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("listen", "127.0.0.1:2222"); err != nil {
		t.Fatal(err)
	}
	if c.Listen != "127.0.0.1:2222" || c.DataDir != "/from/env" || c.Flush.Mode != "interval" ||
		c.Flush.Interval != 20*time.Millisecond || c.Flush.Messages != 7 || c.TopicDefaults["retention.ms"] != "5" {
		t.Fatalf("layers merged wrong: %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestBadInputs(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bad.yaml")
	os.WriteFile(file, []byte("listen: 1\nnot_a_key: 3\n"), 0o644)
	c := Default()
	if err := c.LoadFile(file); err == nil || !strings.Contains(err.Error(), "not_a_key") {
		t.Fatalf("unknown yaml key: got %v", err)
	}
	if err := c.LoadEnv([]string{"SLUICE_NODE_ID=abc"}); err == nil || !strings.Contains(err.Error(), "SLUICE_NODE_ID") {
		t.Fatalf("bad env: got %v", err)
	}
	if err := c.Set("flush.nope", "1"); err == nil {
		t.Fatal("unknown nested key accepted")
	}
	if err := c.Set("retention_check_interval", "soon"); err == nil {
		t.Fatal("bad duration accepted")
	}
}

// TestMemoryPlan: every share follows the budget unless set explicitly;
// the budget follows the machine unless set.
func TestMemoryPlan(t *testing.T) {
	c := Default()
	p := c.Memory(24 << 30)
	if !p.Derived || p.Budget != 6<<30 || p.HeapLimit != (6<<30)/100*85 || p.WALSegmentBytes != 64<<20 ||
		p.QueuedRequestBytes != 6<<30/8 || p.DecompressBytes != 6<<30/8 || p.MergeBytes != 64<<20 ||
		p.CompactMapBytes != 128<<20 || p.CompactObjectBytes != 16<<20 {
		t.Fatalf("24 GiB machine: %+v", p)
	}
	if p := c.Memory(0); p.Budget != 2<<30 {
		t.Fatalf("unknown machine: budget %d", p.Budget)
	}
	if p := c.Memory(512 << 20); p.Budget != MinMemoryBudget || p.WALSegmentBytes != 6<<20 || p.MergeBytes != 8<<20 ||
		p.CompactMapBytes != 8<<20 || p.CompactObjectBytes != 4<<20 {
		t.Fatalf("512 MiB machine: %+v", p)
	}
	c.MemoryBudgetMB = 512
	c.WALSegmentBytes = 32 << 20
	c.MemoryLimitMB = -1
	c.CleanerDedupeBufferBytes = 3 << 20
	p = c.Memory(24 << 30)
	if p.Derived || p.Budget != 512<<20 || p.WALSegmentBytes != 32<<20 || p.HeapLimit != 0 ||
		p.QueuedRequestBytes != 64<<20 || p.DecompressBytes != 64<<20 || p.TailBytes != 32<<20 || p.MergeBytes != 16<<20 ||
		p.CompactMapBytes != 3<<20 || p.CompactObjectBytes != 4<<20 {
		t.Fatalf("512 MiB budget: %+v", p)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}
