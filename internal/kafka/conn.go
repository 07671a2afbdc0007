package kafka

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Framing errors. Any of them closes the connection: the byte stream can no
// longer be trusted to be at a frame boundary.
var (
	ErrFrameTooLarge   = errors.New("kafka: request frame too large")
	ErrFrameInvalid    = errors.New("kafka: invalid request frame")
	ErrUnknownAPI      = errors.New("kafka: unknown api key")
	ErrUnsupportedVers = errors.New("kafka: unsupported api version")
)

// RequestHeader is the parsed Kafka request header.
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	ClientID      *string
}

// frameChunk bounds what readBody allocates ahead of the bytes that
// arrived: a frame larger than this grows as it is read, so a size prefix
// alone (a stalled or hostile client, another protocol's bytes) cannot make
// the broker allocate up to the request size limit per connection.
const frameChunk = 1 << 20

// checkSize validates a frame's size prefix against the limit.
func checkSize(n, max int32) error {
	if n < 8 { // api key + version + correlation id at least
		return fmt.Errorf("%w: size %d", ErrFrameInvalid, n)
	}
	if n > max {
		return fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	}
	return nil
}

// readFrame reads one size-prefixed frame.
func readFrame(r io.Reader, max int32) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if err := checkSize(n, max); err != nil {
		return nil, err
	}
	return readBody(r, n, nil)
}

// readBody reads a frame's n bytes: into a buffer from fp if it has one of
// that size (fp may be nil), else into a new one that grows as they arrive,
// frameChunk first, then doubling. New buffers are sized so that fp can
// take them back (capFor).
func readBody(r io.Reader, n int32, fp *framePool) ([]byte, error) {
	var buf []byte
	if fp != nil {
		buf = fp.get(int(n))
	}
	if buf == nil && n <= frameChunk {
		buf = make([]byte, n, capFor(int(n)))
	}
	if buf != nil {
		if _, err := io.ReadFull(r, buf); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the size promised more
			}
			return nil, err
		}
		return buf, nil
	}
	full := capFor(int(n))
	buf = make([]byte, 0, frameChunk)
	for int32(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(full, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):min(cap(buf), int(n))])
		buf = buf[:len(buf)+m]
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the size promised more
			}
			return nil, err
		}
	}
	return buf, nil
}

// parseHeader parses the request header and returns the body that follows.
// Whether the header has tagged fields depends on the request version being
// flexible, so the registry is consulted.
func parseHeader(frame []byte) (RequestHeader, kmsg.Request, []byte, error) {
	var h RequestHeader
	if len(frame) < 8 {
		return h, nil, nil, ErrFrameInvalid
	}
	h.APIKey = int16(binary.BigEndian.Uint16(frame[0:]))
	h.APIVersion = int16(binary.BigEndian.Uint16(frame[2:]))
	h.CorrelationID = int32(binary.BigEndian.Uint32(frame[4:]))
	req := kmsg.RequestForKey(h.APIKey)
	if req == nil {
		return h, nil, nil, fmt.Errorf("%w: %d", ErrUnknownAPI, h.APIKey)
	}
	req.SetVersion(h.APIVersion)
	rd := kbin.Reader{Src: frame[8:]}
	h.ClientID = rd.NullableString()
	if req.IsFlexible() {
		skipTags(&rd)
	}
	if !rd.Ok() {
		return h, nil, nil, fmt.Errorf("%w: truncated header", ErrFrameInvalid)
	}
	return h, req, rd.Src, nil
}

func skipTags(rd *kbin.Reader) {
	n := rd.Uvarint()
	for i := uint32(0); i < n && rd.Ok(); i++ {
		rd.Uvarint() // tag
		l := rd.Uvarint()
		rd.Span(int(l))
	}
}

// pending is a dispatched request awaiting its response.
type pending struct {
	hdr                   RequestHeader
	start                 time.Time
	complete              func() kmsg.Response // nil means no response (acks=0 produce)
	apiVersionsV0Fallback bool
	rc                    *reqCtx // nil for the ApiVersions fallback
	// raw, when set, is a SASL token written as a bare size-prefixed
	// frame (the exchange after a v0 SaslHandshake), not a response.
	raw []byte
	// closeAfter closes the connection once this response is written
	// (a failed authentication).
	closeAfter bool
	// reserved is the request's size, held against the server's request
	// budget until its response is built.
	reserved int64
	// frame, when set, goes back to the server's framePool once the
	// response is built: set for requests whose handlers keep nothing of
	// their frame past that point.
	frame []byte
}

// conn serves one client connection.
type conn struct {
	srv      *Server
	listener Listener
	auth     authState              // read loop only, until authenticated
	user     atomic.Pointer[string] // authenticated user; nil: anonymous
	// mech and expiry (unix ns, 0: never) are the SASL session's, for
	// re-authentication (read loop only).
	mech   string
	expiry int64
	nc     net.Conn
	logger *slog.Logger
	queue  chan pending
	wg     sync.WaitGroup
	closed chan struct{}
	once   sync.Once
	// muteUntil (unix ns) holds back the next request of a client over
	// its quota (KIP-219: the throttle applies after the response).
	muteUntil atomic.Int64

	// br buffers reads while a request is arriving; between requests it
	// goes back to the server's pool, so an idle connection holds no read
	// buffer (read loop only).
	br *bufio.Reader
	// For the reaper, on the server's clock (Server.now): the phase and
	// when it began (setPhase), when a response was last written, when
	// the write in progress began (0: none), and requests dispatched but
	// not yet answered.
	phase     atomic.Int64
	lastWrite atomic.Int64
	writing   atomic.Int64
	inflight  atomic.Int32
}

// mute holds the connection's next request back for d.
func (c *conn) mute(d time.Duration) {
	until := time.Now().Add(d).UnixNano()
	if until > c.muteUntil.Load() {
		c.muteUntil.Store(until)
	}
}

// sleep waits d, or until the connection closes; false if it closed.
func (c *conn) sleep(d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-c.closed:
		return false
	}
}

func (c *conn) close() {
	c.once.Do(func() {
		close(c.closed)
		c.nc.Close()
	})
}

// maxPreAuthBytes bounds a request on a SASL listener before the client
// has authenticated (Kafka's sasl.server.max.receive.size default).
const maxPreAuthBytes = 512 << 10

func (c *conn) serve(ctx context.Context) {
	defer c.close()
	c.wg.Add(1)
	go c.writeLoop()
	defer func() {
		close(c.queue)
		c.wg.Wait()
	}()
	if !c.handshakeTLS(ctx) {
		return
	}
	defer c.releaseReader()
	for {
		// Each frame gets its own buffer: kmsg's ReadFrom keeps sub-slices
		// (record batches) of its input, and handlers may still hold them
		// while the next request is read. Only a Produce frame's buffer is
		// reused, once its response is built (framePool).
		limit := c.srv.cfg.MaxRequestBytes
		if c.listener.SASL != nil && c.user.Load() == nil {
			// Before authentication only small requests (ApiVersions,
			// the SASL exchange) are expected, as Kafka's
			// sasl.server.max.receive.size has it.
			limit = min(limit, maxPreAuthBytes)
		}
		frame, err := c.readRequest(limit)
		if err != nil {
			switch {
			case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameInvalid):
				// As Kafka's InvalidReceiveException: worth a line, since
				// a client is speaking another protocol or misconfigured.
				c.srv.metrics.badRequests.Inc()
				if errors.Is(err, ErrFrameTooLarge) {
					c.srv.limits.closed.WithLabelValues(closedFrameTooLarge).Inc()
				}
				c.logger.Info("closing connection after bad frame", "err", err, "limit", limit)
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				c.logger.Debug("closing connection", "err", err)
			}
			return
		}
		reserved := int64(len(frame))
		if !c.sleep(time.Until(time.Unix(0, c.muteUntil.Load()))) {
			c.srv.budget.release(reserved)
			return
		}
		var p pending
		switch {
		case c.listener.SASL != nil && c.user.Load() == nil:
			p, err = c.authenticate(ctx, frame)
		case c.reauthenticating(frame):
			p, err = c.authenticate(ctx, frame)
		case c.sessionExpired():
			c.srv.budget.release(reserved)
			c.logger.Info("closing connection: its SASL session expired without re-authentication")
			return
		default:
			p, err = c.dispatch(ctx, frame)
		}
		if err != nil {
			c.srv.budget.release(reserved)
			c.srv.metrics.badRequests.Inc()
			c.logger.Info("closing connection after bad request", "err", err)
			return
		}
		p.reserved = reserved
		c.inflight.Add(1)
		select {
		case c.queue <- p:
		case <-c.closed:
			c.srv.budget.release(reserved)
			return
		}
		if p.closeAfter {
			return // the writer sends p, then the connection closes
		}
	}
}

// readBufSize is the read buffer a connection holds while a request is
// arriving: large frames are read past it, straight into their own buffer.
const readBufSize = 64 << 10

// readRequest reads the next request frame, of at most limit bytes, and
// reserves its size against the server's request budget: the caller
// releases it. While waiting for a request to begin, the connection holds
// no read buffer; once one begins, the reaper gives it request_read_timeout
// to arrive in full (the time spent waiting for the budget aside).
func (c *conn) readRequest(limit int32) ([]byte, error) {
	c.setPhase(phaseIdle)
	var sz [4]byte
	have := 0
	if c.br == nil || c.br.Buffered() == 0 {
		// Wait for the first byte on the connection itself. This costs a
		// second read syscall per request when none is queued behind it,
		// which is little next to a request's work, and spares an idle
		// connection its read buffer.
		c.releaseReader()
		for have == 0 {
			n, err := c.nc.Read(sz[:1])
			if err != nil && n == 0 {
				return nil, err
			}
			have = n
		}
		c.br = c.srv.readers.Get().(*bufio.Reader)
		c.br.Reset(c.nc)
	}
	c.setPhase(phaseReading)
	if _, err := io.ReadFull(c.br, sz[have:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if err := checkSize(n, limit); err != nil {
		return nil, err
	}
	c.setPhase(phaseBusy)
	if !c.srv.budget.acquire(int64(n), c.closed) {
		return nil, net.ErrClosed
	}
	c.setPhase(phaseReading)
	frame, err := readBody(c.br, n, &c.srv.frames)
	c.setPhase(phaseBusy)
	if err != nil {
		c.srv.budget.release(int64(n))
		return nil, err
	}
	return frame, nil
}

// releaseReader gives the read buffer back to the server's pool.
func (c *conn) releaseReader() {
	if c.br != nil {
		c.br.Reset(nil)
		c.srv.readers.Put(c.br)
		c.br = nil
	}
}

// dispatch decodes one request and runs the ordered part of its handler.
func (c *conn) dispatch(ctx context.Context, frame []byte) (pending, error) {
	hdr, req, body, err := parseHeader(frame)
	if err != nil {
		return pending{}, err
	}
	api, ok := c.srv.apis[hdr.APIKey]
	if !ok {
		return pending{}, fmt.Errorf("%w: %d (%s)", ErrUnknownAPI, hdr.APIKey, kmsg.NameForKey(hdr.APIKey))
	}
	if hdr.APIVersion < api.min || hdr.APIVersion > api.max {
		if hdr.APIKey == int16(kmsg.ApiVersions) {
			// KIP-511: answer an unknown ApiVersions version with a v0
			// response carrying UNSUPPORTED_VERSION and our ranges, so the
			// client can retry with a version we speak.
			return pending{hdr: hdr, apiVersionsV0Fallback: true, complete: func() kmsg.Response {
				return c.srv.apiVersionsResponse(0, 35)
			}}, nil
		}
		return pending{}, fmt.Errorf("%w: %s v%d (supported %d-%d)", ErrUnsupportedVers, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, api.min, api.max)
	}
	if err := req.ReadFrom(body); err != nil {
		return pending{}, fmt.Errorf("%w: decoding %s v%d: %v", ErrFrameInvalid, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err)
	}
	c.srv.metrics.requests.WithLabelValues(kmsg.NameForKey(hdr.APIKey)).Inc()
	c.groupTraffic(hdr, req)
	rc := &reqCtx{ctx: ctx, hdr: hdr, conn: c}
	start := time.Now()
	complete := api.handle(rc, req)
	p := pending{hdr: hdr, start: start, complete: complete, rc: rc}
	if hdr.APIKey == int16(kmsg.Produce) {
		// The log copies every batch before AppendAsync returns, and the
		// answer refers to none of the request's bytes (produce.go).
		p.frame = frame
	}
	return p, nil
}

// writeLoop completes pending requests in order and writes their responses.
// Each response is written as soon as it is complete: holding it back to
// share a syscall with the next would make it wait for that request too
// (a produce behind another's group commit, a long-polling fetch).
// connBufMax is the largest response buffer a connection keeps for itself;
// larger ones go back to the server's shared pool.
const connBufMax = 1 << 20

func (c *conn) writeLoop() {
	defer c.wg.Done()
	var buf []byte
	for p := range c.queue {
		buf = c.respond(&p, buf)
		if p.frame != nil {
			c.srv.frames.put(p.frame)
		}
		c.srv.budget.release(p.reserved)
		c.inflight.Add(-1)
		if len(c.queue) == 0 && cap(buf) > idleBufMax {
			// Nothing more to answer: an idle connection keeps little.
			old := buf
			c.srv.bigBufs.Put(&old)
			buf = nil
		}
	}
}

// idleBufMax is the largest response buffer a connection keeps while it
// has nothing to answer.
const idleBufMax = 16 << 10

// respond completes p and writes its response, if any, encoded into buf
// (which it returns, grown). The request's budget is released as soon as
// the response is built, before a write that a slow client may hold up.
func (c *conn) respond(p *pending, buf []byte) []byte {
	if p.raw != nil {
		buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(p.raw)))
		buf = append(buf, p.raw...)
		if err := c.write(buf); err != nil {
			c.close()
		}
		return buf
	}
	if p.complete == nil {
		if p.rc != nil && p.rc.throttle > 0 {
			c.throttled(*p, p.rc.throttle)
			c.mute(p.rc.throttle) // acks=0: there is no response to carry it
		}
		return buf
	}
	resp := p.complete()
	c.srv.budget.release(p.reserved)
	p.reserved = 0
	if !p.start.IsZero() {
		c.srv.metrics.duration.WithLabelValues(kmsg.NameForKey(p.hdr.APIKey)).Observe(time.Since(p.start).Seconds())
	}
	if resp == nil {
		return buf
	}
	if p.rc != nil && p.rc.throttle > 0 {
		if sr, ok := resp.(kmsg.SetThrottleResponse); ok {
			resp.SetVersion(p.hdr.APIVersion)
			c.throttled(*p, p.rc.throttle)
			sr.SetThrottle(int32(min(p.rc.throttle.Milliseconds(), math.MaxInt32)))
			if _, after := resp.(kmsg.ThrottleResponse).Throttle(); after {
				c.mute(p.rc.throttle)
			} else {
				// Before KIP-219 the broker delays the response itself.
				c.sleep(p.rc.throttle)
			}
		}
	}
	// A Fetch response is encoded into a pooled buffer; others into
	// the connection's own, which never grows past connBufMax.
	out, pooled := buf[:0], false
	if p.hdr.APIKey == int16(kmsg.Fetch) {
		if b, ok := c.srv.bigBufs.Get().(*[]byte); ok {
			out, pooled = (*b)[:0], true
		}
	}
	out = appendResponse(out, p.hdr, resp, p.apiVersionsV0Fallback)
	err := c.write(out)
	if pooled || cap(out) > connBufMax {
		c.srv.bigBufs.Put(&out) // never buf's array: that stays under connBufMax
	} else {
		buf = out
	}
	if err != nil || p.closeAfter {
		c.close() // the loop drains the queue so the reader can exit
	}
	return buf
}

// write writes b, marking the write in progress for the reaper: a client
// that reads nothing for connections_max_idle is closed.
func (c *conn) write(b []byte) error {
	c.writing.Store(max(c.srv.now(), 1))
	_, err := c.nc.Write(b)
	now := c.srv.now()
	c.writing.Store(0)
	c.lastWrite.Store(now)
	return err
}

// throttled counts time a client is held back for its quota.
func (c *conn) throttled(p pending, d time.Duration) {
	c.srv.metrics.throttled.WithLabelValues(kmsg.NameForKey(p.hdr.APIKey)).Add(d.Seconds())
}

// appendResponse frames resp: size, correlation id, header tags when the
// response is flexible (except ApiVersions, whose response header is always
// v0 so that clients can parse it before knowing the version), body.
func appendResponse(dst []byte, hdr RequestHeader, resp kmsg.Response, v0fallback bool) []byte {
	if !v0fallback {
		resp.SetVersion(hdr.APIVersion)
	}
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, hdr.CorrelationID)
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst, uint32(len(dst)-4))
	return dst
}
