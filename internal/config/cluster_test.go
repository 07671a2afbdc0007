package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// clusterConfig is a valid cluster-mode config.
func clusterConfig() Config {
	c := Default()
	c.Etcd.Endpoints = []string{"http://127.0.0.1:2379", "10.0.0.2:2379"}
	c.S3.Endpoint = "127.0.0.1:7070"
	c.S3.Bucket = "sluice"
	return c
}

func TestClusterDefaults(t *testing.T) {
	c := Default()
	if c.ClusterMode() {
		t.Fatal("default config is in cluster mode")
	}
	if c.Etcd.Prefix != "/sluice/" || c.Etcd.DialTimeout != 5*time.Second || c.Cluster.LeaseTTL != 3*time.Second {
		t.Fatalf("defaults: etcd %+v, cluster %+v", c.Etcd, c.Cluster)
	}
	c = clusterConfig()
	if !c.ClusterMode() {
		t.Fatal("etcd.endpoints set but not cluster mode")
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestClusterKeysFromFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "sluice.yaml")
	yaml := `
etcd:
  endpoints: [http://10.0.0.1:2379, "10.0.0.2:2379"]
  prefix: /prod/
  dial_timeout: 2s
  username: u
  password: p
cluster:
  lease_ttl: 3s
s3:
  endpoint: 127.0.0.1:7070
  bucket: sluice
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Default()
	if err := c.LoadFile(file); err != nil {
		t.Fatal(err)
	}
	want := Etcd{Endpoints: []string{"http://10.0.0.1:2379", "10.0.0.2:2379"}, Prefix: "/prod/",
		DialTimeout: 2 * time.Second, Username: "u", Password: "p"}
	if !etcdEqual(c.Etcd, want) || c.Cluster.LeaseTTL != 3*time.Second {
		t.Fatalf("from file: etcd %+v, cluster %+v", c.Etcd, c.Cluster)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestClusterKeysFromEnv(t *testing.T) {
	c := Default()
	env := []string{
		"SLUICE_ETCD_ENDPOINTS=http://10.0.0.1:2379, 10.0.0.2:2379,",
		"SLUICE_ETCD_PREFIX=/prod/", "SLUICE_ETCD_DIAL_TIMEOUT=2s",
		"SLUICE_ETCD_USERNAME=u", "SLUICE_ETCD_PASSWORD=p",
		"SLUICE_CLUSTER_LEASE_TTL=3s",
		"SLUICE_S3_ENDPOINT=127.0.0.1:7070", "SLUICE_S3_BUCKET=sluice",
	}
	if err := c.LoadEnv(env); err != nil {
		t.Fatal(err)
	}
	want := Etcd{Endpoints: []string{"http://10.0.0.1:2379", "10.0.0.2:2379"}, Prefix: "/prod/",
		DialTimeout: 2 * time.Second, Username: "u", Password: "p"}
	if !etcdEqual(c.Etcd, want) || c.Cluster.LeaseTTL != 3*time.Second {
		t.Fatalf("from env: etcd %+v, cluster %+v", c.Etcd, c.Cluster)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.LoadEnv([]string{"SLUICE_CLUSTER_LEASE_TTL=soon"}); err == nil || !strings.Contains(err.Error(), "SLUICE_CLUSTER_LEASE_TTL") {
		t.Fatalf("bad lease TTL from env: %v", err)
	}
}

// TestClusterKeysSet is what serve's flags do: Set with the flag's string.
func TestClusterKeysSet(t *testing.T) {
	c := Default()
	for _, kv := range [][2]string{
		{"etcd.endpoints", "127.0.0.1:2379,127.0.0.1:2380"},
		{"etcd.prefix", "/sluice-test/"},
		{"cluster.lease_ttl", "2s"},
		{"cluster.orphan_grace", "30s"},
		{"cluster.put_hedge", "-1s"},
		{"cluster.read_ahead_bytes", "-1"},
		{"cluster.takeover_grace", "5s"},
		{"cluster.claim_rate", "500"},
		{"s3.endpoint", "127.0.0.1:7070"},
		{"s3.bucket", "b"},
		{"s3.prefix", "c1/"},
		{"s3.region", "us-east-1"},
		{"s3.access_key", "ak"},
		{"s3.secret_key", "sk"},
		{"s3.addressing", "path"},
		{"s3.use_tls", "false"},
		{"s3.create_bucket", "true"},
	} {
		if err := c.Set(kv[0], kv[1]); err != nil {
			t.Fatalf("Set(%s, %s): %v", kv[0], kv[1], err)
		}
	}
	if !slices.Equal(c.Etcd.Endpoints, []string{"127.0.0.1:2379", "127.0.0.1:2380"}) ||
		c.Etcd.Prefix != "/sluice-test/" || c.Cluster.LeaseTTL != 2*time.Second || c.Cluster.OrphanGrace != 30*time.Second ||
		c.Cluster.PutHedge != -time.Second || c.Cluster.ReadAheadBytes != -1 || c.Cluster.TakeoverGrace != 5*time.Second ||
		c.Cluster.ClaimRate != 500 || c.S3.Addressing != "path" || !c.S3.CreateBucket || c.S3.Bucket != "b" {
		t.Fatalf("after Set: etcd %+v, cluster %+v, s3 %+v", c.Etcd, c.Cluster, c.S3)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	// An empty value clears the list: back to single node.
	if err := c.Set("etcd.endpoints", ""); err != nil || c.ClusterMode() {
		t.Fatalf("Set(etcd.endpoints, \"\") = %v, endpoints %q", err, c.Etcd.Endpoints)
	}
	if err := c.Set("cluster.lease_ttl", "5"); err == nil {
		t.Fatal("lease TTL without a unit accepted")
	}
}

func TestClusterValidateNamesTheKey(t *testing.T) {
	cases := []struct {
		name, key, msg string
		mod            func(*Config)
	}{
		{"no s3", "s3.endpoint", "cluster mode (etcd.endpoints set) needs an S3 object store",
			func(c *Config) { c.S3 = Default().S3 }},
		{"no bucket", "s3.bucket", "", func(c *Config) { c.S3.Bucket = "" }},
		{"empty endpoint", "etcd.endpoints", "", func(c *Config) { c.Etcd.Endpoints = []string{""} }},
		{"no port", "etcd.endpoints", "", func(c *Config) { c.Etcd.Endpoints = []string{"etcd1"} }},
		{"bad port", "etcd.endpoints", "", func(c *Config) { c.Etcd.Endpoints = []string{"etcd1:99999"} }},
		{"bad scheme", "etcd.endpoints", "", func(c *Config) { c.Etcd.Endpoints = []string{"unix://x:1"} }},
		{"path", "etcd.endpoints", "", func(c *Config) { c.Etcd.Endpoints = []string{"http://etcd1:2379/v3"} }},
		{"second bad", "etcd.endpoints", `"x"`, func(c *Config) { c.Etcd.Endpoints = append(c.Etcd.Endpoints, "x") }},
		{"empty prefix", "etcd.prefix", "", func(c *Config) { c.Etcd.Prefix = "" }},
		{"prefix slash", "etcd.prefix", "", func(c *Config) { c.Etcd.Prefix = "/sluice" }},
		{"dial timeout", "etcd.dial_timeout", "", func(c *Config) { c.Etcd.DialTimeout = 0 }},
		{"compaction negative", "etcd.compaction_interval", "", func(c *Config) { c.Etcd.CompactionInterval = -time.Second }},
		{"compaction too often", "etcd.compaction_interval", "at least 1s", func(c *Config) { c.Etcd.CompactionInterval = time.Millisecond }},
		{"password alone", "etcd.username", "", func(c *Config) { c.Etcd.Password = "p" }},
		{"username alone", "etcd.password", "", func(c *Config) { c.Etcd.Username = "u" }},
		{"auth without etcd", "etcd.endpoints", "", func(c *Config) {
			c.Etcd.Endpoints = nil
			c.Etcd.Username, c.Etcd.Password = "u", "p"
		}},
		{"lease ttl", "cluster.lease_ttl", "", func(c *Config) { c.Cluster.LeaseTTL = 500 * time.Millisecond }},
		{"orphan grace", "cluster.orphan_grace", ">= 10s", func(c *Config) { c.Cluster.OrphanGrace = 5 * time.Second }},
		{"takeover grace", "cluster.takeover_grace", ">= 0", func(c *Config) { c.Cluster.TakeoverGrace = -time.Second }},
		{"put hedge tiny", "cluster.put_hedge", "between 1ms and 1m", func(c *Config) { c.Cluster.PutHedge = time.Microsecond }},
		{"put hedge huge", "cluster.put_hedge", "between 1ms and 1m", func(c *Config) { c.Cluster.PutHedge = time.Hour }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := clusterConfig()
			tc.mod(&c)
			err := c.Validate()
			if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key+":") || !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("Validate = %v, want an ErrInvalid naming %s (%q)", err, tc.key, tc.msg)
			}
		})
	}
}

// TestSingleNodeOnS3 keeps S3 without etcd valid: one broker whose data
// objects are in a bucket.
func TestSingleNodeOnS3(t *testing.T) {
	c := Default()
	c.S3.Endpoint, c.S3.Bucket = "127.0.0.1:7070", "sluice"
	if err := c.Validate(); err != nil || c.ClusterMode() {
		t.Fatalf("S3 without etcd: Validate %v, cluster mode %v", err, c.ClusterMode())
	}
	// The lease TTL is checked in single-node mode too: a bad value in a
	// shared config file should fail on every node.
	c.Cluster.LeaseTTL = 0
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "cluster.lease_ttl") {
		t.Fatalf("lease_ttl 0: %v", err)
	}
}

func etcdEqual(a, b Etcd) bool {
	return slices.Equal(a.Endpoints, b.Endpoints) && a.Prefix == b.Prefix && a.DialTimeout == b.DialTimeout &&
		a.Username == b.Username && a.Password == b.Password
}

func TestGCPercent(t *testing.T) {
	c := Default()
	if c.GCPercent != 400 || c.MemoryLimitMB != 0 {
		t.Fatalf("defaults: gc_percent %d, memory_limit_mb %d; want 400, 0", c.GCPercent, c.MemoryLimitMB)
	}
	if err := c.Set("gc_percent", "200"); err != nil || c.GCPercent != 200 {
		t.Fatalf("Set(gc_percent, 200): %v, %d", err, c.GCPercent)
	}
	if err := c.Set("memory_limit_mb", "2048"); err != nil || c.MemoryLimitMB != 2048 {
		t.Fatalf("Set(memory_limit_mb, 2048): %v, %d", err, c.MemoryLimitMB)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.GCPercent = 5
	if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "gc_percent") {
		t.Fatalf("gc_percent 5: %v", err)
	}
	c.GCPercent, c.MemoryLimitMB = 400, 10
	if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "memory_limit_mb") {
		t.Fatalf("memory_limit_mb 10: %v", err)
	}
}
