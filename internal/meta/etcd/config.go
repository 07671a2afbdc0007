package etcd

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrConfig is wrapped by every configuration error; the message names the
// offending key.
var ErrConfig = errors.New("meta/etcd: invalid config")

// Defaults. DefaultMaxTxnOps and DefaultMaxRequestBytes are etcd's own
// defaults (--max-txn-ops, --max-request-bytes); set the Config fields to
// the cluster's values if it was started with others.
const (
	DefaultDialTimeout     = 5 * time.Second
	DefaultRequestTimeout  = 5 * time.Second
	DefaultMaxTxnOps       = 128
	DefaultMaxRequestBytes = 3 << 19 // 1.5 MiB
	DefaultListPageSize    = 500
)

// Config configures a Store.
type Config struct {
	// Endpoints are the etcd client URLs ("http://10.0.0.1:2379") or
	// host:port pairs. At least one.
	Endpoints []string
	// Prefix namespaces every key, e.g. "/sluice/prod/". Required, so that
	// two clusters (or a cluster and anything else) can share one etcd
	// without seeing each other's keys.
	Prefix string
	// DialTimeout bounds New's first round trip, which checks that etcd is
	// reachable and has quorum.
	DialTimeout time.Duration
	// RequestTimeout bounds each call (each page of a List) unless the
	// caller's context ends sooner. When it fires the call fails with
	// meta.ErrUnavailable.
	RequestTimeout time.Duration
	// TLS, if set, is used for every endpoint (give https:// endpoints).
	TLS *tls.Config
	// Username and Password enable etcd authentication; both or neither.
	Username string
	Password string
	// MaxTxnOps is the cluster's --max-txn-ops. Txn refuses more compares
	// or more ops than this with ErrTxnTooLarge.
	MaxTxnOps int
	// MaxRequestBytes is the cluster's --max-request-bytes. Txn refuses a
	// transaction whose keys and values exceed it with ErrTxnTooLarge.
	MaxRequestBytes int
	// ListPageSize is how many keys one List round trip fetches.
	ListPageSize int
	// Registerer, if set, gets the store's metrics (sluice_meta_*): the
	// transactions and reads it sends, what its watches receive.
	Registerer prometheus.Registerer
}

// DefaultConfig returns a config for an etcd on localhost; set Prefix.
func DefaultConfig() Config {
	return Config{
		Endpoints:       []string{"http://127.0.0.1:2379"},
		DialTimeout:     DefaultDialTimeout,
		RequestTimeout:  DefaultRequestTimeout,
		MaxTxnOps:       DefaultMaxTxnOps,
		MaxRequestBytes: DefaultMaxRequestBytes,
		ListPageSize:    DefaultListPageSize,
	}
}

// withDefaults fills zero numeric fields, so a Config literal that only sets
// Endpoints and Prefix works.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DialTimeout == 0 {
		c.DialTimeout = d.DialTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = d.RequestTimeout
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = d.MaxTxnOps
	}
	if c.MaxRequestBytes == 0 {
		c.MaxRequestBytes = d.MaxRequestBytes
	}
	if c.ListPageSize == 0 {
		c.ListPageSize = d.ListPageSize
	}
	return c
}

// Validate reports the first invalid field, by name. Zero numeric fields
// are valid (they take the defaults).
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, key, fmt.Sprintf(format, args...))
	}
	if len(c.Endpoints) == 0 {
		return bad("Endpoints", "at least one etcd endpoint is required")
	}
	for i, ep := range c.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			return bad(fmt.Sprintf("Endpoints[%d]", i), "%q: %v", ep, err)
		}
	}
	if c.Prefix == "" {
		return bad("Prefix", `required (e.g. "/sluice/<cluster>/"), so keys never collide with other users of the etcd cluster`)
	}
	if c.DialTimeout < 0 {
		return bad("DialTimeout", "%s is negative", c.DialTimeout)
	}
	if c.RequestTimeout < 0 {
		return bad("RequestTimeout", "%s is negative", c.RequestTimeout)
	}
	if (c.Username == "") != (c.Password == "") {
		if c.Username == "" {
			return bad("Username", "required when Password is set")
		}
		return bad("Password", "required when Username is set")
	}
	if c.MaxTxnOps < 0 {
		return bad("MaxTxnOps", "%d is negative", c.MaxTxnOps)
	}
	if c.MaxRequestBytes < 0 {
		return bad("MaxRequestBytes", "%d is negative", c.MaxRequestBytes)
	}
	if c.ListPageSize < 0 {
		return bad("ListPageSize", "%d is negative", c.ListPageSize)
	}
	return nil
}

func checkEndpoint(ep string) error {
	if ep == "" {
		return errors.New("empty")
	}
	if strings.Contains(ep, "://") {
		u, err := url.Parse(ep)
		if err != nil {
			return err
		}
		switch u.Scheme {
		case "http", "https", "unix", "unixs":
		default:
			return fmt.Errorf("scheme %q is not http, https, unix or unixs", u.Scheme)
		}
		if u.Host == "" && u.Path == "" {
			return errors.New("no host")
		}
		return nil
	}
	if _, _, err := net.SplitHostPort(ep); err != nil {
		return fmt.Errorf("want a URL or host:port: %v", err)
	}
	return nil
}
