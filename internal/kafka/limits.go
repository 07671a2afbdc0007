package kafka

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Network limits, as Kafka's (docs/limits.md): how many connections are
// accepted, how many bytes of requests all connections may hold at once,
// and how long a connection may sit idle or take to send one request.

// ErrInvalidConfig is wrapped by Config.Validate's errors.
var ErrInvalidConfig = errors.New("kafka: invalid config")

// Reasons a connection is refused or closed, the label values of
// sluice_kafka_connections_refused_total and _closed_total.
const (
	refusedMaxConnections = "max_connections"
	refusedMaxPerIP       = "max_connections_per_ip"
	closedIdle            = "idle"
	closedRequestTimeout  = "request_timeout"
	closedFrameTooLarge   = "frame_too_large"
)

// DefaultConfig returns the front-end's defaults: Kafka's where Kafka has a
// bound, and a bound where Kafka has none (docs/limits.md says why).
func DefaultConfig() Config {
	return Config{
		MaxRequestBytes:       100 << 20,
		QueuedMaxRequestBytes: 256 << 20,
		MaxConnections:        10000,
		ConnectionsMaxIdle:    10 * time.Minute,
		RequestReadTimeout:    30 * time.Second,
	}
}

// Validate checks the limits; the error names the field.
func (c Config) Validate() error {
	bad := func(field, format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, field, fmt.Sprintf(format, args...))
	}
	switch {
	case c.MaxRequestBytes < 8:
		return bad("MaxRequestBytes", "must be >= 8, got %d", c.MaxRequestBytes)
	case c.MaxConnections < 0:
		return bad("MaxConnections", "must be >= 0 (0: unlimited), got %d", c.MaxConnections)
	case c.MaxConnectionsPerIP < 0:
		return bad("MaxConnectionsPerIP", "must be >= 0 (0: unlimited), got %d", c.MaxConnectionsPerIP)
	case c.ConnectionsMaxIdle < 0:
		return bad("ConnectionsMaxIdle", "must be >= 0 (0: never), got %v", c.ConnectionsMaxIdle)
	case c.RequestReadTimeout < 0:
		return bad("RequestReadTimeout", "must be >= 0 (0: none), got %v", c.RequestReadTimeout)
	}
	return nil
}

// requestBudget bounds the bytes of requests being read or in flight across
// all connections (Kafka's queued.max.request.bytes, its memory pool). A
// reader reserves the size its frame announces before reading the body (the
// body's buffer still grows only as bytes arrive), and the reservation is
// released once the request's response is built. While the reservations
// reach the limit, readers wait (in order of arrival) instead of reading:
// the connection stops being read, so TCP pushes back on the client.
//
// As Kafka's pool (strict=false), a request is admitted whenever the
// reserved bytes are below the limit, so the total may pass the limit by
// less than one request (at most max request bytes): a frame larger than
// what is left never waits forever, and nothing can deadlock on a partly
// read frame, since a frame is only read once its whole size is reserved.
//
// A frame announcing more than a quarter of the limit does not draw on it:
// large frames take a lane of their own, one at a time. Otherwise a single
// client announcing a large frame and sending it slowly (or not at all)
// would hold the whole budget, and every other connection would wait for
// request_read_timeout to close it. The lane keeps the bound (the limit
// plus one largest request) and leaves a stalled large frame delaying only
// other large frames.
type requestBudget struct {
	limit int64 // <= 0: unbounded (still counted)
	lane  chan struct{}

	mu      sync.Mutex
	used    int64
	waiters []*budgetWaiter

	usedGauge   prometheus.Gauge
	waits       prometheus.Counter
	waitSeconds prometheus.Counter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func (b *requestBudget) open() bool { return b.limit <= 0 || b.used < b.limit }

// large reports whether a frame of n bytes takes the large-frame lane.
func (b *requestBudget) large(n int64) bool { return b.limit > 0 && n > b.limit/4 }

// acquire reserves n bytes, waiting while the budget is spent. It returns
// false, holding nothing, if done is closed first.
func (b *requestBudget) acquire(n int64, done <-chan struct{}) bool {
	if b.large(n) {
		select {
		case b.lane <- struct{}{}:
			return true
		default:
		}
		b.waits.Inc()
		began := time.Now()
		defer func() { b.waitSeconds.Add(time.Since(began).Seconds()) }()
		select {
		case b.lane <- struct{}{}:
			return true
		case <-done:
			return false
		}
	}
	b.mu.Lock()
	if len(b.waiters) == 0 && b.open() {
		b.used += n
		b.usedGauge.Set(float64(b.used))
		b.mu.Unlock()
		return true
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	b.waits.Inc()
	began := time.Now()
	defer func() { b.waitSeconds.Add(time.Since(began).Seconds()) }()
	select {
	case <-w.ready:
		return true
	case <-done:
	}
	b.mu.Lock()
	select {
	case <-w.ready: // granted while done was being noticed
		b.mu.Unlock()
		b.release(n)
		return false
	default:
	}
	if i := slices.Index(b.waiters, w); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
	}
	b.mu.Unlock()
	return false
}

// release returns n reserved bytes and admits waiters while there is room.
func (b *requestBudget) release(n int64) {
	if n == 0 {
		return
	}
	if b.large(n) {
		<-b.lane
		return
	}
	b.mu.Lock()
	b.used -= n
	for len(b.waiters) > 0 && b.open() {
		w := b.waiters[0]
		b.waiters[0] = nil
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
	b.usedGauge.Set(float64(b.used))
	b.mu.Unlock()
}

// inUse is the bytes reserved now.
func (b *requestBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// limitMetrics count the work of the limits, one series per refusal.
type limitMetrics struct {
	refused *prometheus.CounterVec
	closed  *prometheus.CounterVec
}

func newLimitMetrics() (limitMetrics, *requestBudget) {
	m := limitMetrics{
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "connections_refused_total",
			Help: "New connections closed at once, by the limit they would pass: max_connections, max_connections_per_ip.",
		}, []string{"reason"}),
		closed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "connections_closed_total",
			Help: "Connections the broker closed for a limit: idle (connections_max_idle), request_timeout (request_read_timeout), frame_too_large (max_request_bytes).",
		}, []string{"reason"}),
	}
	b := &requestBudget{
		lane: make(chan struct{}, 1),
		usedGauge: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "queued_request_bytes",
			Help: "Bytes of requests being read or in flight, as reserved against queued_max_request_bytes.",
		}),
		waits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "queued_request_waits_total",
			Help: "Times a connection waited to read a request because queued_max_request_bytes was reached.",
		}),
		waitSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "sluice", Subsystem: "kafka", Name: "queued_request_wait_seconds_total",
			Help: "Time connections waited to read a request because queued_max_request_bytes was reached.",
		}),
	}
	// Both labels of each vector exist from the start, so a dashboard
	// shows 0 rather than nothing.
	for _, r := range []string{refusedMaxConnections, refusedMaxPerIP} {
		m.refused.WithLabelValues(r)
	}
	for _, r := range []string{closedIdle, closedRequestTimeout, closedFrameTooLarge} {
		m.closed.WithLabelValues(r)
	}
	return m, b
}

func (m limitMetrics) collectors(b *requestBudget) []prometheus.Collector {
	return []prometheus.Collector{m.refused, m.closed, b.usedGauge, b.waits, b.waitSeconds}
}

// remoteIP is the address max_connections_per_ip counts by.
func remoteIP(nc net.Conn) string {
	a := nc.RemoteAddr()
	if ta, ok := a.(*net.TCPAddr); ok {
		if ip, ok := netip.AddrFromSlice(ta.IP); ok {
			return ip.Unmap().String()
		}
	}
	if a == nil {
		return ""
	}
	if h, _, err := net.SplitHostPort(a.String()); err == nil {
		return h
	}
	return a.String()
}

// admit counts a new connection c from ip, or names the limit it would
// pass. Kafka's per-IP refusal closes the new socket, as here; for the
// broker-wide limit Kafka stops accepting until a slot frees, leaving the
// client in the listen backlog, while sluice closes the socket too, so the
// client sees the refusal at once and backs off (docs/limits.md). A
// listener brokers reach each other through is not held to max_connections,
// as in Kafka, so a flood of clients cannot cut the cluster apart.
func (s *Server) admit(c *conn, ip string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if m := s.cfg.MaxConnections; m > 0 && len(s.conns) >= m && !c.listener.InterBroker {
		return refusedMaxConnections
	}
	if m := s.cfg.MaxConnectionsPerIP; m > 0 && s.perIP[ip] >= m {
		return refusedMaxPerIP
	}
	s.conns[c] = struct{}{}
	s.perIP[ip]++
	return ""
}

// forget undoes admit when c is done.
func (s *Server) forget(c *conn, ip string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if s.perIP[ip]--; s.perIP[ip] <= 0 {
		delete(s.perIP, ip)
	}
}

// A connection's phase says whose turn it is, for the reaper: the client's
// to start a request (idle), the client's to finish sending one (reading),
// or the broker's (busy: waiting for the request budget, handling, held
// back for a quota), which no timeout applies to.
const (
	phaseIdle int64 = iota
	phaseReading
	phaseBusy
)

// now is the time on the server's monotonic clock, in ns since it started.
func (s *Server) now() int64 { return int64(time.Since(s.epoch)) }

// setPhase records that c entered phase p now: one atomic store, so the
// read path pays no deadline syscalls.
func (c *conn) setPhase(p int64) { c.phase.Store(c.srv.now()<<2 | p) }

// reapInterval is how often the reaper looks: a tenth of the shortest
// timeout, between 10ms and 1s, so a timeout fires at most 10% (or 1s) late.
func reapInterval(cfg Config) time.Duration {
	d := time.Second
	for _, t := range []time.Duration{cfg.ConnectionsMaxIdle, cfg.RequestReadTimeout} {
		if t > 0 {
			d = min(d, t/10)
		}
	}
	return max(d, 10*time.Millisecond)
}

// reap closes connections past a timeout until stop is closed.
func (s *Server) reap(stop <-chan struct{}) {
	if s.cfg.ConnectionsMaxIdle <= 0 && s.cfg.RequestReadTimeout <= 0 {
		return
	}
	t := time.NewTicker(reapInterval(s.cfg))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		s.expire()
	}
}

// expire closes every connection past connections_max_idle (no request in
// flight, none being sent, nothing written for that long, or one write
// blocked for that long) or request_read_timeout (a request begun and not
// received in full).
func (s *Server) expire() {
	type victim struct {
		c      *conn
		reason string
	}
	var out []victim
	now := s.now()
	idle, read := int64(s.cfg.ConnectionsMaxIdle), int64(s.cfg.RequestReadTimeout)
	s.mu.Lock()
	for c := range s.conns {
		ph := c.phase.Load()
		since := now - ph>>2
		switch {
		case ph&3 == phaseReading && read > 0 && since > read:
			out = append(out, victim{c, closedRequestTimeout})
		case idle <= 0:
		case ph&3 == phaseIdle && since > idle && c.inflight.Load() == 0 && now-c.lastWrite.Load() > idle:
			out = append(out, victim{c, closedIdle})
		case c.writing.Load() > 0 && now-c.writing.Load() > idle:
			out = append(out, victim{c, closedIdle}) // the client reads nothing
		}
	}
	s.mu.Unlock()
	for _, v := range out {
		s.limits.closed.WithLabelValues(v.reason).Inc()
		if v.reason == closedRequestTimeout {
			v.c.logger.Info("closing connection: a request was not received in full within request_read_timeout",
				"timeout", s.cfg.RequestReadTimeout)
		} else {
			v.c.logger.Debug("closing idle connection", "connections_max_idle", s.cfg.ConnectionsMaxIdle)
		}
		v.c.close()
	}
}
