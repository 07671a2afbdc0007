package scram

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Credential returns user's credential for mechanism m, ErrNotFound when
// there is none.
func (s *Store) Credential(ctx context.Context, user string, m int8) (Credential, error) {
	if MechanismName(m) == "" {
		return Credential{}, fmt.Errorf("%w: %d", ErrUnsupportedMechanism, m)
	}
	kv, err := s.md.Get(ctx, credKey(user, m))
	if errors.Is(err, meta.ErrNotFound) {
		return Credential{}, fmt.Errorf("%w: %s %s", ErrNotFound, user, MechanismName(m))
	}
	if err != nil {
		return Credential{}, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	u, c, ok := decode(kv.Key, kv.Value)
	if !ok || u != user || c.Mechanism != m {
		return Credential{}, fmt.Errorf("%w: stored credential of %s is malformed", ErrNotFound, user)
	}
	return c, nil
}

// SaltedPassword is RFC 5802's Hi(password, salt, iterations) for
// mechanism m: what a SCRAM client sends (as a derived credential) to
// AlterUserScramCredentials.
func SaltedPassword(m int8, password string, salt []byte, iterations int) ([]byte, error) {
	h := hashOf(m)
	return pbkdf2.Key(h, password, salt, iterations, h().Size())
}

// Matches reports whether password is the one c was derived from: the
// check SASL/PLAIN makes against a stored SCRAM credential, so that one
// set of users serves both mechanisms without keeping any password.
func (c Credential) Matches(password string) bool {
	sp, err := SaltedPassword(c.Mechanism, password, c.Salt, int(c.Iterations))
	if err != nil {
		return false
	}
	d := derive(&Upsertion{Mechanism: c.Mechanism, Iterations: c.Iterations, Salt: c.Salt, SaltedPassword: sp})
	return hmac.Equal(d.StoredKey, c.StoredKey)
}

// DefaultIterations is the iteration count of credentials sluice derives
// itself (bootstrap users), Kafka's kafka-configs default.
const DefaultIterations = 4096

// Ensure creates user's credentials for every SCRAM mechanism that has
// none yet, from password: the bootstrap users of the config. Existing
// credentials are left alone, so a password changed since through
// AlterUserScramCredentials stays changed.
func (s *Store) Ensure(ctx context.Context, user, password string) error {
	if user == "" {
		return fmt.Errorf("%w: username must not be empty", ErrUnacceptable)
	}
	for _, m := range []int8{SHA256, SHA512} {
		key := credKey(user, m)
		salt := make([]byte, 32)
		rand.Read(salt)
		sp, err := SaltedPassword(m, password, salt, DefaultIterations)
		if err != nil {
			return err
		}
		b, _ := json.Marshal(derive(&Upsertion{User: user, Mechanism: m, Iterations: DefaultIterations, Salt: salt, SaltedPassword: sp}))
		err = s.md.Txn(ctx, []meta.Compare{{Key: key, Version: 0}}, meta.Put(key, b))
		if err != nil && !errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	return nil
}
