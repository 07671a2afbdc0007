package kafka

import (
	"bufio"
	"context"
	"errors"
	"log/slog"
	"net"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/acl"
	"github.com/sluice-mq/sluice/internal/broker"
	"github.com/sluice-mq/sluice/internal/group"
	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/quota"
	"github.com/sluice-mq/sluice/internal/sasl"
	"github.com/sluice-mq/sluice/internal/scram"
	"github.com/sluice-mq/sluice/internal/txn"
)

// Config is the front-end's configuration.
type Config struct {
	// Traffic hears of produce, fetch and group traffic for metrics
	// (traffic.go); nil: none.
	Traffic Traffic
	// Delays holds back produced records with a delayed-delivery header
	// (nil: the log never reports them, see log.Config.DetectDelay).
	Delays Delayer
	// Schemas validates produced batches of topics that require registered
	// schemas (internal/schemacheck); nil: none do.
	Schemas SchemaChecker
	// Lineage hears who produces to which topics, which clients are in
	// which groups, which transactional ids commit offsets for which groups
	// and who was given which producer id (internal/lineage); nil: nobody.
	Lineage Lineage
	// MaxRequestBytes bounds one request frame; larger frames close the
	// connection (Kafka's socket.request.max.bytes). A frame's buffer
	// grows as its bytes arrive, never to the announced size up front.
	MaxRequestBytes int32
	// QueuedMaxRequestBytes bounds the bytes of requests being read or in
	// flight across all connections (Kafka's queued.max.request.bytes):
	// at the bound, connections wait to read their next request. <= 0:
	// unbounded.
	QueuedMaxRequestBytes int64
	// FetchMaxBytes caps what one Fetch response returns, whatever the
	// request asks (Kafka's broker fetch.max.bytes, KIP-541; the first
	// batch may still exceed it, KIP-74). <= 0: the request's own limit.
	FetchMaxBytes int32
	// MaxConnections and MaxConnectionsPerIP refuse (close) a new
	// connection past that many open, on all listeners together or from
	// one address (Kafka's max.connections, max.connections.per.ip).
	// 0: unlimited.
	MaxConnections      int
	MaxConnectionsPerIP int
	// ConnectionsMaxIdle closes a connection with no request in flight
	// and no bytes moved for this long (connections.max.idle.ms). 0: never.
	ConnectionsMaxIdle time.Duration
	// RequestReadTimeout closes a connection that began a request and has
	// not sent all of it within this long (a slowloris client). 0: none.
	RequestReadTimeout time.Duration
	// Quotas holds the client quotas and enforces them on produce and
	// fetch traffic; nil disables client quotas.
	Quotas *quota.Manager
	// Credentials keeps SCRAM credentials (Describe/AlterUserScramCredentials).
	Credentials *scram.Store
	// Authorizer checks requests against ACLs and keeps them; nil or
	// disabled allows everything (and the ACL APIs are SECURITY_DISABLED).
	Authorizer *acl.Authorizer
}

// anonymous is the user of every client not authenticated (Kafka's
// ANONYMOUS principal), which user quotas (default or named) apply to.
const anonymous = "ANONYMOUS"

// Listener is what a listener asks of its connections.
type Listener struct {
	// Name is the listener's name, which Metadata, DescribeCluster and
	// FindCoordinator use to pick the broker addresses to answer with
	// (each listener advertises its own): PLAINTEXT, SASL_PLAINTEXT.
	Name string
	// SASL, when set, makes clients authenticate before any request but
	// ApiVersions (a SASL_PLAINTEXT listener).
	SASL *sasl.Authenticator
	// SessionLifetime, when positive, ends an authentication after this
	// long (Kafka's connections.max.reauth.ms, KIP-368): clients that can
	// re-authenticate on the connection do so, with the same mechanism
	// and principal; a connection whose session ended is closed at its
	// next request.
	SessionLifetime time.Duration
	// InterBroker marks the listener brokers reach each other through,
	// which max_connections does not apply to (as in Kafka).
	InterBroker bool
}

// handlerFunc runs the ordered part of a request and returns the function
// that completes it. Returning nil means "send no response".
type handlerFunc func(rc *reqCtx, req kmsg.Request) func() kmsg.Response

type api struct {
	key      int16
	min, max int16
	handle   handlerFunc
}

// reqCtx is what a handler knows about the request it serves.
type reqCtx struct {
	ctx  context.Context
	hdr  RequestHeader
	conn *conn
	// throttle is how long a client over its quota is held back after
	// this request; set by handlers, applied by the connection.
	throttle time.Duration
}

// chargeQuota records n bytes of key's traffic against the client's quota
// and keeps the longest throttle it asks for.
func (rc *reqCtx) chargeQuota(key string, n int) {
	if q := rc.conn.srv.cfg.Quotas; q != nil && n > 0 {
		rc.throttle = max(rc.throttle, q.Throttle(key, rc.conn.principal(), rc.clientID(), n))
	}
}

// Lineage is what the front-end tells internal/lineage. Calls come once
// per request and topic, never per record, and must be quick.
type Lineage interface {
	Produced(clientID, principal, topic string)
	Joined(group, clientID string)
	TxnReads(txnID, group string)
	ProducerID(pid int64, epoch int16, clientID, principal, txnID string)
}

// SchemaChecker validates a produced batch against the schema registry.
type SchemaChecker interface {
	Check(ctx context.Context, topic string, p *log.Partition, records []byte) error
}

// checkSchemas runs the configured SchemaChecker, if any.
func (rc *reqCtx) checkSchemas(topic string, p *log.Partition, records []byte) error {
	if c := rc.conn.srv.cfg.Schemas; c != nil {
		return c.Check(rc.ctx, topic, p, records)
	}
	return nil
}

// lineage is the configured Lineage, or nil.
func (rc *reqCtx) lineage() Lineage { return rc.conn.srv.cfg.Lineage }

func (rc *reqCtx) broker() *broker.Broker     { return rc.conn.srv.broker }
func (rc *reqCtx) groups() *group.Coordinator { return rc.conn.srv.groups }
func (rc *reqCtx) txns() *txn.Coordinator     { return rc.conn.srv.txns }
func (rc *reqCtx) version() int16             { return rc.hdr.APIVersion }

// done wraps an already-built response.
func done(r kmsg.Response) func() kmsg.Response { return func() kmsg.Response { return r } }

type metrics struct {
	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	connections prometheus.Gauge
	badRequests prometheus.Counter
	throttled   *prometheus.CounterVec
}

// Server accepts Kafka connections.
type Server struct {
	cfg     Config
	broker  *broker.Broker
	groups  *group.Coordinator
	txns    *txn.Coordinator
	logger  *slog.Logger
	apis    map[int16]api
	metrics metrics

	// budget bounds the request bytes all connections hold.
	budget *requestBudget
	limits limitMetrics
	// epoch starts the monotonic clock connection phases are timed on.
	epoch time.Time
	stop  chan struct{} // closed by Close: ends the reaper
	once  sync.Once

	mu    sync.Mutex
	lns   []net.Listener
	conns map[*conn]struct{}
	perIP map[string]int // open connections by remote address
	wg    sync.WaitGroup

	// frames holds the buffers of large Produce frames for reuse.
	frames framePool
	// bigBufs holds response buffers over connBufMax (*[]byte), shared by
	// all connections so that a large Fetch response reuses memory instead
	// of growing a fresh buffer, while an idle connection keeps little.
	bigBufs sync.Pool
	// readers holds the read buffers (*bufio.Reader of readBufSize) of
	// connections between requests.
	readers sync.Pool
}

// NewServer builds the front-end over b, the group coordinator groups and
// the transaction coordinator txns. reg may be nil. cfg must be valid
// (Config.Validate).
func NewServer(cfg Config, b *broker.Broker, groups *group.Coordinator, txns *txn.Coordinator, logger *slog.Logger, reg prometheus.Registerer) *Server {
	s := &Server{cfg: cfg, broker: b, groups: groups, txns: txns, logger: logger, apis: map[int16]api{},
		conns: map[*conn]struct{}{}, perIP: map[string]int{}, epoch: time.Now(), stop: make(chan struct{})}
	s.readers.New = func() any { return bufio.NewReaderSize(nil, readBufSize) }
	s.limits, s.budget = newLimitMetrics()
	s.budget.limit = cfg.QueuedMaxRequestBytes
	s.metrics = metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "requests_total", Help: "Kafka requests by API.",
		}, []string{"api"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "request_duration_seconds",
			Help:    "Time from a request being read to its response being ready, by API.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"api"}),
		connections: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "connections", Help: "Open client connections.",
		}),
		badRequests: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "bad_requests_total", Help: "Malformed or unsupported requests (connection closed).",
		}),
		throttled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "quota_throttle_seconds_total",
			Help: "Time clients over their quota were held back, by API.",
		}, []string{"api"}),
	}
	if reg != nil {
		reg.MustRegister(s.metrics.requests, s.metrics.duration, s.metrics.connections, s.metrics.badRequests, s.metrics.throttled)
		reg.MustRegister(s.limits.collectors(s.budget)...)
	}
	for _, reg := range registrations {
		reg(s)
	}
	s.wg.Go(func() { s.reap(s.stop) })
	return s
}

// registrations is filled by each API file's init, so that adding an API is
// adding a file. It holds functions, not state: two servers in one process
// share nothing.
var registrations []func(*Server)

func register(key kmsg.Key, min, max int16, h handlerFunc) {
	registrations = append(registrations, func(s *Server) {
		s.apis[int16(key)] = api{key: int16(key), min: min, max: max, handle: h}
	})
}

// apiKeys returns the registered APIs sorted by key.
func (s *Server) apiKeys() []api {
	out := make([]api, 0, len(s.apis))
	for _, a := range s.apis {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}

// Serve accepts connections on ln, a PLAINTEXT listener, until ctx is
// done or ln is closed.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeListener(ctx, ln, Listener{Name: "PLAINTEXT"})
}

// ServeListener accepts connections on ln, served as l says, until ctx is
// done or ln is closed. A server may serve several listeners at once.
func (s *Server) ServeListener(ctx context.Context, ln net.Listener, l Listener) error {
	s.mu.Lock()
	s.lns = append(s.lns, ln)
	s.mu.Unlock()
	var backoff time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return nil
			}
			// Transient failures (EMFILE, ENFILE, ECONNABORTED, ...) must not
			// stop the listener: back off and keep accepting, as net/http does.
			if backoff == 0 {
				backoff = 5 * time.Millisecond
			} else if backoff *= 2; backoff > time.Second {
				backoff = time.Second
			}
			s.logger.Warn("accept failed; retrying", "err", err, "backoff", backoff)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			tc.SetNoDelay(true)
		}
		c := &conn{srv: s, nc: nc, listener: l, logger: s.logger.With("remote", nc.RemoteAddr().String()),
			queue: make(chan pending, 64), closed: make(chan struct{})}
		c.setPhase(phaseIdle)
		c.lastWrite.Store(s.now())
		ip := remoteIP(nc)
		if reason := s.admit(c, ip); reason != "" {
			s.limits.refused.WithLabelValues(reason).Inc()
			c.logger.Debug("refusing connection", "limit", reason)
			nc.Close()
			continue
		}
		s.metrics.connections.Inc()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			c.serve(ctx)
			s.metrics.connections.Dec()
			s.forget(c, ip)
		}()
	}
}

// Close stops accepting, closes every connection and waits for handlers.
func (s *Server) Close() error {
	s.once.Do(func() { close(s.stop) })
	s.mu.Lock()
	for _, ln := range s.lns {
		ln.Close()
	}
	for c := range s.conns {
		c.close()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}
