package config

import (
	"errors"
	"strings"
	"testing"
)

func TestListeners(t *testing.T) {
	c := Default()
	ls, err := c.KafkaListeners()
	if err != nil || len(ls) != 1 || ls[0].Name != Plaintext || ls[0].Bind != c.Listen {
		t.Fatalf("default listeners %+v %v", ls, err)
	}
	if err := c.Set("listeners", "PLAINTEXT://:9092, sasl_plaintext://0.0.0.0:9093"); err != nil {
		t.Fatal(err)
	}
	if err := c.Set("advertised_listeners", "SASL_PLAINTEXT://kafka.example:19093"); err != nil {
		t.Fatal(err)
	}
	ls, err = c.KafkaListeners()
	if err != nil || len(ls) != 2 || ls[1].Name != SASLPlaintext || !ls[1].SASL() || ls[1].Advertised != "kafka.example:19093" || ls[0].Advertised != "" {
		t.Fatalf("listeners %+v %v", ls, err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestSecurityRefusals(t *testing.T) {
	cases := []struct {
		key string
		mod func(*Config)
	}{
		{"listeners", func(c *Config) { c.Listeners = []string{"HTTP://:80"} }},
		{"listeners", func(c *Config) { c.Listeners = []string{"PLAINTEXT:9092"} }},
		{"listeners", func(c *Config) { c.Listeners = []string{"PLAINTEXT://:1", "PLAINTEXT://:2"} }},
		{"advertised_listeners", func(c *Config) { c.AdvertisedListeners = []string{"PLAINTEXT://h:1"} }},
		{"advertised_listeners", func(c *Config) {
			c.Listeners = []string{"PLAINTEXT://:1"}
			c.AdvertisedListeners = []string{"SSL://h:1"}
		}},
		{"advertised_addr", func(c *Config) { c.Listeners = []string{"PLAINTEXT://:1"}; c.AdvertisedAddr = "h:1" }},
		{"tls.cert_file", func(c *Config) { c.Listeners = []string{"SSL://:1"} }},
		{"tls.cert_file", func(c *Config) {
			c.Listeners = []string{"SSL://:1"}
			c.TLS = TLS{CertFile: "/nonexistent.pem", KeyFile: "/nonexistent-key.pem"}
		}},
		{"sasl.mechanisms", func(c *Config) { c.SASL.Mechanisms = []string{"GSSAPI"} }},
		{"sasl.users", func(c *Config) { c.SASL.Users = []string{"nopassword"} }},
		{"cluster.inter_broker_listener", func(c *Config) {
			c.Etcd.Endpoints = []string{"127.0.0.1:2379"}
			c.S3.Endpoint, c.S3.Bucket = "127.0.0.1:9000", "b"
			c.Listeners = []string{"SASL_PLAINTEXT://:1"}
		}},
		{"cluster.inter_broker_listener", func(c *Config) {
			c.Etcd.Endpoints = []string{"127.0.0.1:2379"}
			c.S3.Endpoint, c.S3.Bucket = "127.0.0.1:9000", "b"
			c.Listeners = []string{"SASL_PLAINTEXT://:1"}
			c.Cluster.InterBrokerListener = "SSL"
		}},
		{"cluster.inter_broker_user", func(c *Config) {
			c.Etcd.Endpoints = []string{"127.0.0.1:2379"}
			c.S3.Endpoint, c.S3.Bucket = "127.0.0.1:9000", "b"
			c.Listeners = []string{"SASL_PLAINTEXT://:1"}
			c.Cluster.InterBrokerListener = "sasl_plaintext"
		}},
	}
	for _, tc := range cases {
		c := Default()
		tc.mod(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key) {
			t.Errorf("%s: got %v", tc.key, err)
		}
	}
}
