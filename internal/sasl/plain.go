package sasl

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/scram"
)

// ParsePlain splits a PLAIN message (RFC 4616: authzid NUL authcid NUL
// passwd) into its parts.
func ParsePlain(msg []byte) (authzid, user, password string, err error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", "", "", fmt.Errorf("%w: PLAIN message must be authzid NUL user NUL password", ErrAuthentication)
	}
	authzid, user, password = string(parts[0]), string(parts[1]), string(parts[2])
	if user == "" || password == "" {
		return "", "", "", fmt.Errorf("%w: PLAIN user and password must not be empty", ErrAuthentication)
	}
	return authzid, user, password, nil
}

// plainStep checks the one PLAIN message against the user's stored SCRAM
// credential (SHA-512 first, else SHA-256).
func (a *Authenticator) plainStep(s *Session) func(context.Context, []byte) ([]byte, bool, error) {
	return func(ctx context.Context, msg []byte) ([]byte, bool, error) {
		authzid, user, password, err := ParsePlain(msg)
		if err != nil {
			return nil, false, err
		}
		if authzid != "" && authzid != user {
			// Kafka allows no impersonation through PLAIN either.
			return nil, false, fmt.Errorf("%w: authorization id %q differs from the user", ErrAuthentication, authzid)
		}
		for _, m := range []int8{scram.SHA512, scram.SHA256} {
			c, err := a.creds.Credential(ctx, user, m)
			if errors.Is(err, scram.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, false, fmt.Errorf("%w: %v", ErrAuthentication, err)
			}
			if !c.Matches(password) {
				return nil, false, failure(Plain)
			}
			s.user = user
			return nil, true, nil
		}
		return nil, false, failure(Plain)
	}
}
