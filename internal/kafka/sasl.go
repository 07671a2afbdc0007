package kafka

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/sasl"
)

// SaslHandshake v0-1 and SaslAuthenticate v0-2. On a SASL listener the
// connection answers them itself until the client is authenticated
// (conn.authenticate); these handlers see only what comes after, or any
// on a listener without SASL, and refuse it with ILLEGAL_SASL_STATE as
// Kafka does.
func init() {
	register(kmsg.SASLHandshake, 0, 1, handleSASLHandshake)
	register(kmsg.SASLAuthenticate, 0, 2, handleSASLAuthenticate)
}

func handleSASLHandshake(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	resp := kreq.(*kmsg.SASLHandshakeRequest).ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	if a := rc.conn.listener.SASL; a != nil {
		resp.SupportedMechanisms = a.Mechanisms()
	}
	return done(resp)
}

func handleSASLAuthenticate(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	resp := kreq.(*kmsg.SASLAuthenticateRequest).ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.ErrorCode = kerr.IllegalSaslState.Code
	msg := "SaslAuthenticate request received after successful authentication"
	if rc.conn.listener.SASL == nil {
		msg = "this listener does not use SASL"
	}
	resp.ErrorMessage = &msg
	return done(resp)
}

// authState is where a SASL connection is in its authentication.
type authState struct {
	session *sasl.Session // set by a successful SaslHandshake
	raw     bool          // v0 handshake: tokens follow as bare frames
}

// principal is the connection's user: the authenticated one, else
// ANONYMOUS.
func (c *conn) principal() string {
	if u := c.user.Load(); u != nil {
		return *u
	}
	return anonymous
}

// authenticate serves one frame of a SASL connection not yet
// authenticated. Only ApiVersions, SaslHandshake and then the mechanism's
// exchange (SaslAuthenticate, or bare tokens after a v0 handshake) are
// allowed; anything else closes the connection, as Kafka does. A failed
// exchange is answered (SASL_AUTHENTICATION_FAILED) and closes it too.
func (c *conn) authenticate(ctx context.Context, frame []byte) (pending, error) {
	a := c.listener.SASL
	if c.auth.raw {
		reply, ok, err := c.auth.session.Step(ctx, frame)
		if err != nil {
			return pending{}, fmt.Errorf("SASL %s authentication failed: %w", c.auth.session.Mechanism(), err)
		}
		if ok {
			if err := c.authenticated(); err != nil {
				return pending{}, err
			}
		}
		if reply == nil {
			reply = []byte{}
		}
		return pending{raw: reply}, nil
	}
	hdr, req, body, err := parseHeader(frame)
	if err != nil {
		return pending{}, err
	}
	switch kmsg.Key(hdr.APIKey) {
	case kmsg.ApiVersions:
		return c.dispatch(ctx, frame)
	case kmsg.SASLHandshake, kmsg.SASLAuthenticate:
	default:
		return pending{}, fmt.Errorf("unexpected %s request during SASL authentication", kmsg.NameForKey(hdr.APIKey))
	}
	api := c.srv.apis[hdr.APIKey]
	if hdr.APIVersion < api.min || hdr.APIVersion > api.max {
		return pending{}, fmt.Errorf("%w: %s v%d (supported %d-%d)", ErrUnsupportedVers, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, api.min, api.max)
	}
	if err := req.ReadFrom(body); err != nil {
		return pending{}, fmt.Errorf("%w: decoding %s v%d: %v", ErrFrameInvalid, kmsg.NameForKey(hdr.APIKey), hdr.APIVersion, err)
	}
	c.srv.metrics.requests.WithLabelValues(kmsg.NameForKey(hdr.APIKey)).Inc()
	p := pending{hdr: hdr}
	switch r := req.(type) {
	case *kmsg.SASLHandshakeRequest:
		resp := r.ResponseKind().(*kmsg.SASLHandshakeResponse)
		p.complete = done(resp)
		resp.SupportedMechanisms = a.Mechanisms()
		switch s, err := a.Start(r.Mechanism); {
		case c.user.Load() != nil && (r.Mechanism != c.mech || hdr.APIVersion == 0):
			// KIP-368: re-authentication keeps the mechanism, and runs
			// over SaslAuthenticate.
			resp.ErrorCode = kerr.IllegalSaslState.Code
			p.closeAfter = true
		case c.auth.session != nil:
			resp.ErrorCode = kerr.IllegalSaslState.Code
			p.closeAfter = true
		case errors.Is(err, sasl.ErrUnsupportedMechanism):
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			p.closeAfter = true
			c.logger.Info("SASL mechanism refused", "mechanism", r.Mechanism)
		default:
			c.auth.session = s
			c.auth.raw = hdr.APIVersion == 0
		}
	case *kmsg.SASLAuthenticateRequest:
		resp := r.ResponseKind().(*kmsg.SASLAuthenticateResponse)
		p.complete = done(resp)
		if c.auth.session == nil {
			resp.ErrorCode = kerr.IllegalSaslState.Code
			msg := "SaslAuthenticate before a successful SaslHandshake"
			resp.ErrorMessage = &msg
			p.closeAfter = true
			break
		}
		reply, ok, err := c.auth.session.Step(ctx, r.SASLAuthBytes)
		if err != nil {
			resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
			msg := "Authentication failed: " + err.Error()
			resp.ErrorMessage = &msg
			p.closeAfter = true
			c.logger.Info("SASL authentication failed", "mechanism", c.auth.session.Mechanism(), "err", err)
			break
		}
		resp.SASLAuthBytes = reply
		if resp.SASLAuthBytes == nil {
			resp.SASLAuthBytes = []byte{}
		}
		if ok {
			if err := c.authenticated(); err != nil {
				resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
				msg := "Authentication failed: " + err.Error()
				resp.ErrorMessage, resp.SASLAuthBytes = &msg, nil
				p.closeAfter = true
				break
			}
			resp.SessionLifetimeMillis = c.listener.SessionLifetime.Milliseconds()
		}
	}
	return p, nil
}

// authenticated makes the session's user the connection's principal.
func (c *conn) authenticated() error {
	u := c.auth.session.User()
	if prev := c.user.Load(); prev != nil && *prev != u {
		// KIP-368: a connection stays one principal.
		return fmt.Errorf("%w: re-authenticated as %q, not %q", sasl.ErrAuthentication, u, *prev)
	}
	c.user.Store(&u)
	c.mech = c.auth.session.Mechanism()
	if d := c.listener.SessionLifetime; d > 0 {
		c.expiry = time.Now().Add(d).UnixNano()
	}
	c.logger.Debug("SASL authenticated", "user", u, "mechanism", c.mech)
	c.auth = authState{}
	return nil
}

// reauthenticating reports whether frame is a SaslHandshake or
// SaslAuthenticate of a KIP-368 re-authentication: on an authenticated
// connection of a listener whose sessions expire.
func (c *conn) reauthenticating(frame []byte) bool {
	if c.listener.SASL == nil || c.listener.SessionLifetime <= 0 || c.user.Load() == nil || len(frame) < 2 {
		return false
	}
	k := kmsg.Key(binary.BigEndian.Uint16(frame))
	return k == kmsg.SASLHandshake || (k == kmsg.SASLAuthenticate && c.auth.session != nil)
}

// sessionExpired reports whether the connection's SASL session ended.
func (c *conn) sessionExpired() bool {
	return c.expiry != 0 && time.Now().UnixNano() > c.expiry
}

// tlsHandshakeTimeout bounds a TLS client's handshake.
const tlsHandshakeTimeout = 10 * time.Second

// handshakeTLS completes the TLS handshake of a TLS connection (a no-op
// for others) and, on a listener without SASL, makes a verified client
// certificate's subject the principal (Kafka's default SSL principal,
// e.g. "CN=alice,O=Example"). false: the handshake failed and the
// connection is done.
func (c *conn) handshakeTLS(ctx context.Context) bool {
	tc, ok := c.nc.(*tls.Conn)
	if !ok {
		return true
	}
	hctx, cancel := context.WithTimeout(ctx, tlsHandshakeTimeout)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.logger.Info("TLS handshake failed", "err", err)
		return false
	}
	if st := tc.ConnectionState(); c.listener.SASL == nil && len(st.VerifiedChains) > 0 {
		u := st.PeerCertificates[0].Subject.String()
		c.user.Store(&u)
	}
	return true
}
