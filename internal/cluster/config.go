package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Sentinel errors, always wrapped.
var (
	// ErrConfig: a Config field is invalid; the message names it.
	ErrConfig = errors.New("cluster: invalid config")
	// ErrBrokerIDInUse: another live broker is registered with this id.
	ErrBrokerIDInUse = errors.New("cluster: broker id in use by a live broker")
	// ErrUnsupportedStore: the meta store has no leases or no watches (the
	// embedded backend); cluster mode needs etcd.
	ErrUnsupportedStore = errors.New("cluster: meta store does not support leases and watches")
	// ErrPartitionGone: returned (wrapped) by Handler.Acquire when the
	// partition's topic was deleted meanwhile, an expected race that is
	// logged as such rather than as a failure.
	ErrPartitionGone = errors.New("cluster: the partition no longer exists")
)

// DefaultLeaseTTL is the membership and leadership lease when Config.LeaseTTL
// is zero.
const DefaultLeaseTTL = 5 * time.Second

// Config configures a Node.
type Config struct {
	BrokerID int32
	Host     string // advertised host
	Port     int32  // advertised port
	Rack     string
	// Endpoints are the advertised addresses of every listener, when the
	// broker has more than one (Host:Port is the first).
	Endpoints []Endpoint
	// LeaseTTL is the membership and leadership lease: a broker that stops
	// renewing it loses both this long after its last renewal. etcd rounds
	// it up to whole seconds. Zero is DefaultLeaseTTL.
	LeaseTTL time.Duration
	// RebalanceDelay is how long a new broker must have been a member (as
	// this node saw it) before existing leaders hand partitions to it.
	// Leaderless partitions go to it at once.
	RebalanceDelay time.Duration
	// Logger; nil discards.
	Logger *slog.Logger
	// Now is the clock; nil is time.Now.
	Now func() time.Time
}

// DefaultConfig returns a config with the defaults; set BrokerID, Host and
// Port.
func DefaultConfig() Config {
	return Config{LeaseTTL: DefaultLeaseTTL}
}

// Validate reports the first invalid field, by name.
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrConfig, key, fmt.Sprintf(format, args...))
	}
	switch {
	case c.BrokerID < 0:
		return bad("BrokerID", "%d is negative", c.BrokerID)
	case c.Host == "":
		return bad("Host", "the advertised host is required")
	case c.Port <= 0 || c.Port > 65535:
		return bad("Port", "%d is not a TCP port", c.Port)
	case c.LeaseTTL < 0:
		return bad("LeaseTTL", "%s is negative", c.LeaseTTL)
	case c.RebalanceDelay < 0:
		return bad("RebalanceDelay", "%s is negative", c.RebalanceDelay)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
