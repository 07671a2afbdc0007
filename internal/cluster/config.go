package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
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
// is zero. A SIGKILLed broker's partitions are led again elsewhere at most
// about LeaseTTL + 0.5 s (etcd's expiry check) + a take-over after the kill;
// 3 s keeps that under 5 s. A shorter lease costs one more renewal per broker
// every TTL/3 (at 3 s: one a second, a few hundred bytes; etcd handles
// renewals on its leader without a Raft write), and a broker is fenced by
// any stall of itself or of etcd longer than about 0.9 TTL.
const DefaultLeaseTTL = 3 * time.Second

// DefaultClaimRate is Config.ClaimRate's default: partition claims a
// broker starts per second. Two brokers taking over a dead one's 33,000
// partitions claim them in about 8 s; etcd sees a few hundred small
// transactions a second from each, since concurrent claims share them.
const DefaultClaimRate = 2000

// DefaultTakeoverGrace is Config.TakeoverGrace's default, in leases.
const DefaultTakeoverGrace = 3

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
	// TakeoverGrace is how long a holding that no broker key vouches for
	// any more is left alone before another broker deposes it and takes
	// its partitions over, when etcd may have been what ended its
	// session (this node could not reach etcd either, within a lease TTL
	// before): the time a broker whose session expired in an etcd stall
	// has to register a new one and keep its partitions. Zero is
	// DefaultTakeoverGrace times LeaseTTL: after a stall every broker
	// registers again at about the same moment, but on a loaded etcd the
	// last one was seen up to 3.9 s after the first (3 s lease). A broker
	// that dies while the others reach etcd is
	// deposed at once.
	TakeoverGrace time.Duration
	// ClaimRate bounds the partition claims this broker starts per
	// second (each is two small etcd transactions, shared with other
	// claims, plus the partition's load). Zero is DefaultClaimRate;
	// negative is no bound.
	ClaimRate float64
	// RebalanceDelay is how long a new broker must have been a member (as
	// this node saw it) before existing leaders hand partitions to it.
	// Leaderless partitions go to it at once.
	RebalanceDelay time.Duration
	// PreviousSession is the meta session this broker's previous process
	// registered with (read back from its data directory), 0 if unknown.
	// A registration found under it is that process's, now dead: Start
	// takes it over and revokes the session, so the old leaderships end at
	// once instead of when the lease expires.
	PreviousSession int64
	// OnSession, if set, is told each session the node registers with, so
	// that the next process can pass it as PreviousSession.
	OnSession func(id int64)
	// Logger; nil discards.
	Logger *slog.Logger
	// Registerer, if set, gets the node's metrics (sluice_cluster_*).
	Registerer prometheus.Registerer
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
	case c.TakeoverGrace < 0:
		return bad("TakeoverGrace", "%s is negative", c.TakeoverGrace)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.TakeoverGrace == 0 {
		c.TakeoverGrace = DefaultTakeoverGrace * c.LeaseTTL
	}
	if c.ClaimRate == 0 {
		c.ClaimRate = DefaultClaimRate
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}
