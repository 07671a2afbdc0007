package sasl

import (
	"context"
	"errors"
	"fmt"

	xscram "github.com/xdg-go/scram"

	"github.com/sluice-mq/sluice/internal/scram"
)

// scramStep runs the SCRAM server conversation: client-first, then
// client-final, each answered by the server's message.
func (a *Authenticator) scramStep(s *Session, m int8) func(context.Context, []byte) ([]byte, bool, error) {
	gen := xscram.SHA256
	if m == scram.SHA512 {
		gen = xscram.SHA512
	}
	var conv *xscram.ServerConversation
	var lookupCtx context.Context
	srv, _ := gen.NewServer(func(user string) (xscram.StoredCredentials, error) {
		c, err := a.creds.Credential(lookupCtx, user, m)
		if err != nil {
			return xscram.StoredCredentials{}, err
		}
		return xscram.StoredCredentials{
			KeyFactors: xscram.KeyFactors{Salt: string(c.Salt), Iters: int(c.Iterations)},
			StoredKey:  c.StoredKey, ServerKey: c.ServerKey,
		}, nil
	})
	conv = srv.NewConversation()
	return func(ctx context.Context, msg []byte) (_ []byte, _ bool, err error) {
		lookupCtx = ctx
		// xdg-go/scram v1.1.2 panicked on some malformed client-first
		// messages (FuzzSession found one; kept in testdata). A client's
		// bytes must never bring the broker down, so a panic in the
		// parser is one more failed authentication.
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("%w: malformed %s message", ErrAuthentication, s.mech)
			}
		}()
		reply, err := conv.Step(string(msg))
		if errors.Is(err, scram.ErrStorage) {
			return nil, false, fmt.Errorf("%w: %v", ErrAuthentication, err)
		}
		if err != nil {
			return nil, false, failure(s.mech) // unknown user and bad proof alike
		}
		if conv.Done() {
			if !conv.Valid() {
				return nil, false, failure(s.mech)
			}
			if az := conv.AuthzID(); az != "" && az != conv.Username() {
				return nil, false, fmt.Errorf("%w: authorization id %q differs from the user", ErrAuthentication, az)
			}
			s.user = conv.Username()
			return []byte(reply), true, nil
		}
		return []byte(reply), false, nil
	}
}
