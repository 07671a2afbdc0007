// Package sasl is the server side of Kafka's SASL authentication: the
// mechanisms a SASL listener offers and one authentication exchange per
// connection. The Kafka framing (SaslHandshake, SaslAuthenticate, or the
// raw tokens that follow a v0 handshake) is internal/kafka's; this package
// only sees the mechanism's own bytes.
//
// Users are the SCRAM credentials of internal/scram, one set for every
// mechanism: SCRAM-SHA-256 and SCRAM-SHA-512 run RFC 5802 against them
// (github.com/xdg-go/scram), and PLAIN (RFC 4616) derives the password it
// is sent with a stored credential's salt and iteration count and compares
// the result, so no password is ever stored.
package sasl

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/scram"
)

// Mechanism names, as clients send them in SaslHandshake.
const (
	Plain       = "PLAIN"
	ScramSHA256 = "SCRAM-SHA-256"
	ScramSHA512 = "SCRAM-SHA-512"
)

// Supported lists every mechanism this package implements, in the order
// SaslHandshake reports them.
var Supported = []string{ScramSHA512, ScramSHA256, Plain, OAuthBearer}

// Default is what a listener offers when the config names no mechanism:
// every mechanism checked against stored credentials (not OAUTHBEARER,
// whose unsecured tokens anyone can write).
var Default = []string{ScramSHA512, ScramSHA256, Plain}

// Errors. ErrUnsupportedMechanism is Kafka's UNSUPPORTED_SASL_MECHANISM;
// ErrAuthentication is SASL_AUTHENTICATION_FAILED.
var (
	ErrUnsupportedMechanism = errors.New("sasl: unsupported mechanism")
	ErrAuthentication       = errors.New("sasl: authentication failed")
)

// Credentials looks up a user's SCRAM credential; *scram.Store is one.
type Credentials interface {
	Credential(ctx context.Context, user string, mechanism int8) (scram.Credential, error)
}

// Authenticator holds the mechanisms a listener offers and where users are
// kept. It is safe for concurrent use; each connection starts its own
// Session.
type Authenticator struct {
	mechs []string
	creds Credentials
}

// New returns an Authenticator offering mechs (Default when empty).
func New(mechs []string, creds Credentials) (*Authenticator, error) {
	if len(mechs) == 0 {
		mechs = Default
	}
	var out []string
	for _, m := range mechs {
		m = strings.ToUpper(strings.TrimSpace(m))
		if !slices.Contains(Supported, m) {
			return nil, fmt.Errorf("%w: %q (supported: %s)", ErrUnsupportedMechanism, m, strings.Join(Supported, ", "))
		}
		if !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return &Authenticator{mechs: out, creds: creds}, nil
}

// Mechanisms are the enabled mechanisms, for SaslHandshake's answer.
func (a *Authenticator) Mechanisms() []string { return slices.Clone(a.mechs) }

// Session is one authentication exchange.
type Session struct {
	mech string
	user string
	done bool
	step func(ctx context.Context, msg []byte) (reply []byte, done bool, err error)
}

// Start begins an exchange with mechanism mech, which must be enabled.
func (a *Authenticator) Start(mech string) (*Session, error) {
	if !slices.Contains(a.mechs, mech) {
		return nil, fmt.Errorf("%w: %q (enabled: %s)", ErrUnsupportedMechanism, mech, strings.Join(a.mechs, ", "))
	}
	s := &Session{mech: mech}
	switch mech {
	case Plain:
		s.step = a.plainStep(s)
	case ScramSHA256:
		s.step = a.scramStep(s, scram.SHA256)
	case ScramSHA512:
		s.step = a.scramStep(s, scram.SHA512)
	case OAuthBearer:
		s.step = a.oauthStep(s, time.Now)
	}
	return s, nil
}

// Mechanism is the session's mechanism.
func (s *Session) Mechanism() string { return s.mech }

// Step feeds one client message and returns the reply to send. done means
// the client is authenticated as User; an error means it is not (errors
// wrap ErrAuthentication) and the exchange is over.
func (s *Session) Step(ctx context.Context, msg []byte) (reply []byte, done bool, err error) {
	if s.done {
		return nil, true, fmt.Errorf("%w: the exchange is already complete", ErrAuthentication)
	}
	reply, done, err = s.step(ctx, msg)
	if err != nil {
		s.done = true
		return nil, false, err
	}
	s.done = done
	return reply, done, nil
}

// User is the authenticated user once Step reported done.
func (s *Session) User() string {
	if !s.done {
		return ""
	}
	return s.user
}

// failure is the error every failed exchange gets: the same words whatever
// went wrong, as Kafka's, so a client cannot tell an unknown user from a
// wrong password.
func failure(mech string) error {
	return fmt.Errorf("%w: invalid credentials with SASL mechanism %s", ErrAuthentication, mech)
}
