package scram

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"sync"
)

// maxVerified bounds the passwords a Verifier remembers; past it, it
// forgets them all and starts again.
const maxVerified = 4096

// Verifier checks a user's password against the stored SCRAM credentials,
// as SASL/PLAIN does, for HTTP Basic (the admin API, the schema registry),
// where clients send the password with every request. A check is a PBKDF2
// of the credential's iterations (4096 by default: milliseconds of CPU),
// so the Verifier remembers the passwords that matched, as HMACs under a
// key of its own, bound to the credential they matched: a credential
// changed or deleted since no longer matches. Wrong passwords are not
// remembered.
type Verifier struct {
	store *Store
	key   []byte

	mu       sync.Mutex
	verified map[[sha256.Size]byte]struct{}
}

// NewVerifier returns a Verifier of the store's credentials.
func (s *Store) NewVerifier() *Verifier {
	key := make([]byte, 32)
	rand.Read(key)
	return &Verifier{store: s, key: key, verified: map[[sha256.Size]byte]struct{}{}}
}

// Verify reports whether password is user's, by the user's SCRAM-SHA-512
// credential, else its SCRAM-SHA-256 one.
func (v *Verifier) Verify(ctx context.Context, user, password string) bool {
	for _, m := range []int8{SHA512, SHA256} {
		c, err := v.store.Credential(ctx, user, m)
		if err != nil {
			continue
		}
		k := v.entry(user, c, password)
		v.mu.Lock()
		_, ok := v.verified[k]
		v.mu.Unlock()
		if ok {
			return true
		}
		if !c.Matches(password) {
			return false
		}
		v.mu.Lock()
		if len(v.verified) >= maxVerified {
			clear(v.verified)
		}
		v.verified[k] = struct{}{}
		v.mu.Unlock()
		return true
	}
	return false
}

// entry is the HMAC of user, the credential and password, each
// length-prefixed so that no two different inputs run together.
func (v *Verifier) entry(user string, c Credential, password string) [sha256.Size]byte {
	h := hmac.New(sha256.New, v.key)
	for _, b := range [][]byte{[]byte(user), {byte(c.Mechanism)}, binary.BigEndian.AppendUint32(nil, uint32(c.Iterations)),
		c.Salt, c.StoredKey, []byte(password)} {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(b))))
		h.Write(b)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}
