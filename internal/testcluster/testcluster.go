package testcluster

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
	"github.com/sluice-mq/sluice/internal/objstore/s3"
	"github.com/sluice-mq/sluice/internal/objstore/s3/s3test"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// Defaults for Options.
const (
	DefaultBrokers  = 3
	DefaultLeaseTTL = 2 * time.Second
)

// Bucket is the S3 bucket every cluster stores its objects in.
const Bucket = "sluice-test"

// EtcdPrefix is the etcd key prefix of every cluster; each cluster has its
// own etcd, so one fixed prefix is enough.
const EtcdPrefix = "/sluice-test/"

// Options configures Start. Zero values take the defaults.
type Options struct {
	// Brokers is how many brokers Start starts (DefaultBrokers).
	Brokers int
	// LeaseTTL is every broker's --lease-ttl (DefaultLeaseTTL). The test
	// etcd allows leases down to 1 s. BrokerDefaultLease leaves the flag
	// out, so brokers run with their own default.
	LeaseTTL time.Duration
	// EtcdProcess runs etcd in a child process (etcdtest.StartProcess), so
	// that a test can pause it.
	EtcdProcess bool
	// Together starts every broker at the same moment on the empty etcd,
	// instead of one after another, each ready before the next starts.
	Together bool
	// ExtraArgs are appended to every broker's serve flags; a flag given
	// here overrides the harness's value for it.
	ExtraArgs []string
	// S3Flags are extra flags of the S3 server's posix backend
	// (s3test.WithPosixFlags).
	S3Flags []string
	// SASLUsers, when set, gives every broker a second listener,
	// SASL_PLAINTEXT on a fixed port (SASLAddr), with these name:password
	// users.
	SASLUsers []string
	// SASLOnly makes that listener the only one: brokers reach each other
	// through it too, as InterBrokerUser ("ib:ib-secret").
	SASLOnly bool
}

// BrokerDefaultLease as Options.LeaseTTL runs the brokers with the lease
// TTL a production broker has by default.
const BrokerDefaultLease time.Duration = -1

// InterBrokerUser is the user brokers log in as with Options.SASLOnly.
const InterBrokerUser = "ib:ib-secret"

// Cluster is a running etcd, S3 server and brokers. Its methods are for
// the test goroutine; they are not safe for concurrent use.
type Cluster struct {
	t       testing.TB
	opts    Options
	bin     string
	etcd    *etcdtest.Server
	s3      *s3test.Server
	brokers []*testbroker.Proc
	admin   []string        // admin HTTP address of each broker
	sasl    []string        // SASL_PLAINTEXT address of each broker (Options.SASLUsers)
	used    map[string]bool // every address handed to a broker
}

// Start starts etcd, the S3 server (bucket created) and opts.Brokers
// brokers with node ids 1..N, one after another, each ready to serve.
func Start(t testing.TB, opts Options) *Cluster {
	t.Helper()
	if opts.Brokers == 0 {
		opts.Brokers = DefaultBrokers
	}
	if opts.LeaseTTL == 0 {
		opts.LeaseTTL = DefaultLeaseTTL
	}
	if opts.Brokers < 0 {
		t.Fatalf("testcluster: Options.Brokers %d is negative", opts.Brokers)
	}
	if opts.LeaseTTL < time.Second && opts.LeaseTTL != BrokerDefaultLease {
		t.Fatalf("testcluster: Options.LeaseTTL %v is under etcd's 1s minimum", opts.LeaseTTL)
	}
	bin := testbroker.BuildBinary(t)
	c := startServices(t, opts.EtcdProcess, opts.S3Flags...)
	c.opts, c.bin = opts, bin
	if opts.Together {
		for range opts.Brokers {
			c.newBroker()
		}
		testbroker.StartAll(c.brokers...)
		return c
	}
	for range opts.Brokers {
		c.AddBroker()
	}
	return c
}

// startServices starts etcd and S3 and creates the bucket: the part of
// Start that needs no broker. Their cleanups are registered before any
// broker's, so they stop after every broker.
func startServices(t testing.TB, etcdProcess bool, s3flags ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	if etcdProcess {
		c.etcd = etcdtest.StartProcess(t)
	} else {
		c.etcd = etcdtest.Start(t)
	}
	c.s3 = s3test.Start(t, s3test.WithKeepAlive(), s3test.WithPosixFlags(s3flags...))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := s3.New(ctx, c.s3.Config(Bucket)) // Config sets CreateBucket
	if err != nil {
		t.Fatalf("testcluster: creating bucket %s: %v", Bucket, err)
	}
	st.Close()
	return c
}

// Addrs are the Kafka addresses of the brokers that are running, in index
// order: bootstrap servers for a client.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, p := range c.brokers {
		if exited, _ := p.Exited(); !exited {
			out = append(out, p.Addr())
		}
	}
	return out
}

// Broker is broker i (0-based; its node id is i+1).
func (c *Cluster) Broker(i int) *testbroker.Proc {
	c.t.Helper()
	if i < 0 || i >= len(c.brokers) {
		c.t.Fatalf("testcluster: no broker %d (have %d)", i, len(c.brokers))
	}
	return c.brokers[i]
}

// Len is how many brokers were started, running or not.
func (c *Cluster) Len() int { return len(c.brokers) }

// NodeID is broker i's node id.
func NodeID(i int) int32 { return int32(i + 1) }

// KillBroker kills broker i with SIGKILL and waits until it is gone. Its
// lease in etcd lives on until the lease TTL runs out.
func (c *Cluster) KillBroker(i int) {
	c.t.Helper()
	c.Broker(i).Kill()
}

// StopBroker stops broker i gracefully (SIGTERM); an unclean exit fails the
// test.
func (c *Cluster) StopBroker(i int) {
	c.t.Helper()
	c.Broker(i).Stop()
}

// RestartBroker starts broker i again with the same node id, data directory
// and flags, stopping it gracefully first if it is running. Its new address
// is in Broker(i).Addr() and Addrs().
func (c *Cluster) RestartBroker(i int) {
	c.t.Helper()
	c.Broker(i).Restart()
}

// StartAll starts every broker that is not running at the same moment
// and waits until all are ready: a full-cluster restart.
func (c *Cluster) StartAll() {
	c.t.Helper()
	var stopped []*testbroker.Proc
	for _, p := range c.brokers {
		if exited, _ := p.Exited(); exited {
			stopped = append(stopped, p)
		}
	}
	testbroker.StartAll(stopped...)
}

// AddBroker starts one more broker, node id Len()+1, and returns its index.
func (c *Cluster) AddBroker() int {
	c.t.Helper()
	i := c.newBroker()
	testbroker.StartAll(c.brokers[i])
	return i
}

// newBroker adds broker Len()+1 without starting it.
func (c *Cluster) newBroker() int {
	c.t.Helper()
	i := len(c.brokers)
	// Fixed ports, so a restarted broker is where clients last saw it, as
	// in a real deployment (the flag overrides testbroker's :0).
	// Picked together: a port picked and released alone can be handed
	// out again by the next pick.
	addrs := c.freeAddrs(3)
	admin, listen := addrs[0], addrs[1]
	args := brokerArgs(i, listen, admin, c.etcd.Endpoint(), c.s3.Config(Bucket), c.opts)
	saslAddr := ""
	switch {
	case len(c.opts.SASLUsers) > 0 && c.opts.SASLOnly:
		saslAddr = listen
		args = append(args, "--listeners", "SASL_PLAINTEXT://"+listen, "--sasl-users", strings.Join(c.opts.SASLUsers, ","),
			"--inter-broker-listener", "SASL_PLAINTEXT", "--inter-broker-user", InterBrokerUser)
	case len(c.opts.SASLUsers) > 0:
		saslAddr = addrs[2]
		args = append(args, "--listeners", "PLAINTEXT://"+listen+",SASL_PLAINTEXT://"+saslAddr,
			"--sasl-users", strings.Join(c.opts.SASLUsers, ","))
	}
	c.brokers = append(c.brokers, testbroker.NewProcess(c.t, c.bin, args...))
	c.admin = append(c.admin, admin)
	c.sasl = append(c.sasl, saslAddr)
	return i
}

// AdminAddr is broker i's admin HTTP address (/metrics, /debug/pprof),
// fixed across restarts.
func (c *Cluster) AdminAddr(i int) string {
	c.t.Helper()
	c.Broker(i)
	return c.admin[i]
}

// SASLAddr is broker i's SASL_PLAINTEXT address ("" without
// Options.SASLUsers), fixed across restarts.
func (c *Cluster) SASLAddr(i int) string {
	c.t.Helper()
	c.Broker(i)
	return c.sasl[i]
}

// Etcd is the cluster's etcd, for tests that stop or restart it.
func (c *Cluster) Etcd() *etcdtest.Server { return c.etcd }

// S3 is the cluster's S3 server, for tests that stop, pause or restart it.
func (c *Cluster) S3() *s3test.Server { return c.s3 }

// brokerArgs are the serve flags of broker i listening on listen (Kafka)
// and admin (HTTP), after the --listen, --data-dir and --ready-file that
// testbroker.StartProcess gives.
func brokerArgs(i int, listen, admin, etcdEndpoint string, s3c s3.Config, opts Options) []string {
	args := []string{
		"--listen", listen,
		"--admin-listen", admin,
		"--node-id", strconv.Itoa(int(NodeID(i))),
		"--etcd-endpoints", etcdEndpoint,
		"--etcd-prefix", EtcdPrefix,
	}
	if opts.LeaseTTL != BrokerDefaultLease {
		args = append(args, "--lease-ttl", opts.LeaseTTL.String())
	}
	args = append(args,
		// Compaction rounds every few seconds, so every cluster test runs
		// with etcd's history being compacted under its watches.
		"--etcd-compaction-interval", "3s",
		"--s3-endpoint", s3c.Endpoint,
		"--s3-bucket", s3c.Bucket,
		"--s3-access-key", s3c.AccessKey,
		"--s3-secret-key", s3c.SecretKey,
		"--s3-region", s3c.Region,
		"--s3-addressing", string(s3c.Addressing),
	)
	return append(args, opts.ExtraArgs...)
}

// freeAddrs picks n ports no broker of c was given: a port picked and
// released can be handed out again by the next pick, and brokers created
// before any starts (Options.Together) would then collide.
func (c *Cluster) freeAddrs(n int) []string {
	c.t.Helper()
	if c.used == nil {
		c.used = map[string]bool{}
	}
	for range 100 {
		addrs := testbroker.FreeAddrs(c.t, n)
		if !slices.ContainsFunc(addrs, func(a string) bool { return c.used[a] }) {
			for _, a := range addrs {
				c.used[a] = true
			}
			return addrs
		}
	}
	c.t.Fatalf("testcluster: no %d fresh ports in 100 tries", n)
	return nil
}
