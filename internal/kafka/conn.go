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

// frameChunk bounds what readFrame allocates ahead of the bytes that
// arrived: a frame larger than this grows as it is read, so a size prefix
// alone (a stalled or hostile client, another protocol's bytes) cannot make
// the broker allocate up to the request size limit per connection.
const frameChunk = 1 << 20

// readFrame reads one size-prefixed frame. buf is reused when large enough.
func readFrame(r io.Reader, max int32, buf []byte) ([]byte, error) {
	var sz [4]byte
	if _, err := io.ReadFull(r, sz[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(sz[:]))
	if n < 8 { // api key + version + correlation id at least
		return nil, fmt.Errorf("%w: size %d", ErrFrameInvalid, n)
	}
	if n > max {
		return nil, fmt.Errorf("%w: %d > %d", ErrFrameTooLarge, n, max)
	}
	if int32(cap(buf)) >= n || n <= frameChunk {
		if int32(cap(buf)) < n {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf = make([]byte, 0, frameChunk)
	for int32(len(buf)) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(int(n), 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
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
	br := bufio.NewReaderSize(c.nc, 64<<10)
	for {
		// Each frame gets its own buffer: kmsg's ReadFrom keeps sub-slices
		// (record batches) of its input, and handlers may still hold them
		// while the next request is read, so reuse would need a copy.
		limit := c.srv.cfg.MaxRequestBytes
		if c.listener.SASL != nil && c.user.Load() == nil {
			// Before authentication only small requests (ApiVersions,
			// the SASL exchange) are expected, as Kafka's
			// sasl.server.max.receive.size has it.
			limit = min(limit, maxPreAuthBytes)
		}
		frame, err := readFrame(br, limit, nil)
		if err != nil {
			switch {
			case errors.Is(err, ErrFrameTooLarge), errors.Is(err, ErrFrameInvalid):
				// As Kafka's InvalidReceiveException: worth a line, since
				// a client is speaking another protocol or misconfigured.
				c.srv.metrics.badRequests.Inc()
				c.logger.Info("closing connection after bad frame", "err", err, "limit", limit)
			case !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed):
				c.logger.Debug("closing connection", "err", err)
			}
			return
		}
		if !c.sleep(time.Until(time.Unix(0, c.muteUntil.Load()))) {
			return
		}
		var p pending
		switch {
		case c.listener.SASL != nil && c.user.Load() == nil:
			p, err = c.authenticate(ctx, frame)
		case c.reauthenticating(frame):
			p, err = c.authenticate(ctx, frame)
		case c.sessionExpired():
			c.logger.Info("closing connection: its SASL session expired without re-authentication")
			return
		default:
			p, err = c.dispatch(ctx, frame)
		}
		if err != nil {
			c.srv.metrics.badRequests.Inc()
			c.logger.Info("closing connection after bad request", "err", err)
			return
		}
		select {
		case c.queue <- p:
		case <-c.closed:
			return
		}
		if p.closeAfter {
			return // the writer sends p, then the connection closes
		}
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
	rc := &reqCtx{ctx: ctx, hdr: hdr, conn: c}
	start := time.Now()
	complete := api.handle(rc, req)
	return pending{hdr: hdr, start: start, complete: complete, rc: rc}, nil
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
		if p.raw != nil {
			buf = binary.BigEndian.AppendUint32(buf[:0], uint32(len(p.raw)))
			if _, err := c.nc.Write(append(buf, p.raw...)); err != nil {
				c.close()
			}
			continue
		}
		if p.complete == nil {
			if p.rc != nil && p.rc.throttle > 0 {
				c.throttled(p, p.rc.throttle)
				c.mute(p.rc.throttle) // acks=0: there is no response to carry it
			}
			continue
		}
		resp := p.complete()
		if !p.start.IsZero() {
			c.srv.metrics.duration.WithLabelValues(kmsg.NameForKey(p.hdr.APIKey)).Observe(time.Since(p.start).Seconds())
		}
		if resp == nil {
			continue
		}
		if p.rc != nil && p.rc.throttle > 0 {
			if sr, ok := resp.(kmsg.SetThrottleResponse); ok {
				resp.SetVersion(p.hdr.APIVersion)
				c.throttled(p, p.rc.throttle)
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
		_, err := c.nc.Write(out)
		if pooled || cap(out) > connBufMax {
			c.srv.bigBufs.Put(&out) // never buf's array: that stays under connBufMax
		} else {
			buf = out
		}
		if err != nil || p.closeAfter {
			c.close()
			continue // drain the queue so the reader can exit
		}
	}
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
