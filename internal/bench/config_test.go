package bench

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatalf("default config: %v", err)
	}
	tests := []struct {
		name string
		edit func(*Config)
		flag string // "" means valid
	}{
		{"kfake without brokers", func(c *Config) { c.Target, c.Brokers = TargetKfake, nil }, ""},
		{"disk only", func(c *Config) { c.Records, c.DiskBWDir = 0, "/tmp" }, ""},
		{"acks 1 turns idempotence off", func(c *Config) { c.Acks, c.MaxInflight = "1", 5 }, ""},
		{"unknown target", func(c *Config) { c.Target = "kafka" }, "--target"},
		{"no brokers", func(c *Config) { c.Brokers = nil }, "--brokers"},
		{"compare against kfake", func(c *Config) { c.Target, c.Compare = TargetKfake, true }, "--compare"},
		{"zero records", func(c *Config) { c.Records = 0 }, "--records"},
		{"negative size", func(c *Config) { c.Size = -1 }, "--size"},
		{"zero partitions", func(c *Config) { c.Partitions = 0 }, "--partitions"},
		{"zero topics", func(c *Config) { c.Topics = 0 }, "--topics"},
		{"negative server pid", func(c *Config) { c.ServerPID = -1 }, "--server-pid"},
		{"server pid with kfake", func(c *Config) { c.Target, c.ServerPID = TargetKfakeProcess, 1 }, "--server-pid"},
		{"server pid with compare", func(c *Config) { c.Compare, c.ServerPID = true, 1 }, ""},
		{"zero replication", func(c *Config) { c.Replication = 0 }, "--replication"},
		{"bad acks", func(c *Config) { c.Acks = "2" }, "--acks"},
		{"inflight with idempotence", func(c *Config) { c.MaxInflight = 5 }, "--max-inflight"},
		{"bad compression", func(c *Config) { c.Compression = "brotli" }, "--compression"},
		{"no producers", func(c *Config) { c.Producers = 0 }, "--producers"},
		{"more producers than records", func(c *Config) { c.Records, c.Producers = 2, 3 }, "--producers"},
		{"negative linger", func(c *Config) { c.Linger = -1 }, "--linger"},
		{"negative rate", func(c *Config) { c.RateMBps = -1 }, "--rate"},
		{"rate with empty values", func(c *Config) { c.RateMBps, c.Size = 1, 0 }, "--rate"},
		{"zero timeout", func(c *Config) { c.Timeout = 0 }, "--timeout"},
		{"tiny disk size", func(c *Config) { c.DiskBWDir, c.DiskBWBytes = "/tmp", 10 }, "--disk-bw-size"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultConfig()
			tt.edit(&c)
			err := c.Validate()
			if tt.flag == "" {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tt.flag) {
				t.Errorf("err = %v, want ErrInvalidConfig naming %s", err, tt.flag)
			}
		})
	}
}
