// Package scram keeps SCRAM credentials (KIP-554): what
// DescribeUserScramCredentials and AlterUserScramCredentials manage. A
// credential is stored as RFC 5802 asks, never as the password: the salt,
// the iteration count, StoredKey = H(HMAC(SaltedPassword, "Client Key"))
// and ServerKey = HMAC(SaltedPassword, "Server Key"), where the client sent
// SaltedPassword = Hi(password, salt, iterations). Credentials live in the
// metadata store (embedded on a single node, etcd in a cluster), so every
// broker sees the same ones.
//
// SASL listeners (internal/sasl) authenticate against these credentials:
// SCRAM-SHA-256/512 directly, PLAIN by deriving the sent password with a
// stored credential's salt and iterations (Credential.Matches).
package scram

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"sort"
	"strings"

	"github.com/sluice-mq/sluice/internal/meta"
)

// Errors, each one Kafka error code.
var (
	ErrNotFound             = errors.New("scram: no such credential")          // RESOURCE_NOT_FOUND
	ErrDuplicate            = errors.New("scram: user named more than once")   // DUPLICATE_RESOURCE
	ErrUnsupportedMechanism = errors.New("scram: unsupported SCRAM mechanism") // UNSUPPORTED_SASL_MECHANISM
	ErrUnacceptable         = errors.New("scram: unacceptable credential")     // UNACCEPTABLE_CREDENTIAL
	ErrStorage              = errors.New("scram: metadata store unavailable")  // UNKNOWN_SERVER_ERROR
)

// Mechanisms, numbered as Kafka's ScramMechanism.
const (
	SHA256 int8 = 1
	SHA512 int8 = 2
)

// Iteration bounds Kafka enforces.
const (
	MinIterations = 4096
	MaxIterations = 16384
)

// MechanismName is the SASL name of a mechanism, "" if unknown.
func MechanismName(m int8) string {
	switch m {
	case SHA256:
		return "SCRAM-SHA-256"
	case SHA512:
		return "SCRAM-SHA-512"
	}
	return ""
}

func hashOf(m int8) func() hash.Hash {
	if m == SHA512 {
		return sha512.New
	}
	return sha256.New
}

// Credential is one user's credential for one mechanism.
type Credential struct {
	Mechanism  int8   `json:"mechanism"`
	Iterations int32  `json:"iterations"`
	Salt       []byte `json:"salt"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// Deletion removes a user's credential for a mechanism.
type Deletion struct {
	User      string
	Mechanism int8
}

// Upsertion sets a user's credential for a mechanism.
type Upsertion struct {
	User           string
	Mechanism      int8
	Iterations     int32
	Salt           []byte
	SaltedPassword []byte
}

// Store keeps credentials in a metadata store.
type Store struct {
	md meta.Store
}

// New returns the credential store over md.
func New(md meta.Store) *Store { return &Store{md: md} }

const prefix = "/scram/"

func userPrefix(user string) string { return prefix + url.PathEscape(user) + "/" }

func credKey(user string, m int8) string { return fmt.Sprintf("%s%d", userPrefix(user), m) }

// Describe returns the credentials of users, by user; every user when
// users is empty. A named user without credentials, or named twice, gets
// an error instead.
func (s *Store) Describe(ctx context.Context, users []string) (map[string][]Credential, map[string]error, error) {
	kvs, err := s.md.List(ctx, prefix)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	all := map[string][]Credential{}
	for _, kv := range kvs {
		if user, c, ok := decode(kv.Key, kv.Value); ok {
			all[user] = append(all[user], c)
		}
	}
	for _, cs := range all {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Mechanism < cs[j].Mechanism })
	}
	if len(users) == 0 {
		return all, nil, nil
	}
	out, errs := map[string][]Credential{}, map[string]error{}
	seen := map[string]int{}
	for _, u := range users {
		seen[u]++
	}
	for u, n := range seen {
		switch {
		case n > 1:
			errs[u] = fmt.Errorf("%w: cannot describe user %q more than once in one request", ErrDuplicate, u)
		case len(all[u]) == 0:
			errs[u] = fmt.Errorf("%w: attempt to describe a user credential that does not exist: %q", ErrNotFound, u)
		default:
			out[u] = all[u]
		}
	}
	return out, errs, nil
}

// Alter applies deletions and upsertions and returns an error (or nil) for
// every user they name. A user's alterations are checked together and
// applied together, or none of them.
func (s *Store) Alter(ctx context.Context, dels []Deletion, ups []Upsertion) map[string]error {
	byUser := map[string][]alteration{}
	var order []string
	add := func(user string, a alteration) {
		if _, ok := byUser[user]; !ok {
			order = append(order, user)
		}
		byUser[user] = append(byUser[user], a)
	}
	for i := range dels {
		add(dels[i].User, alteration{del: &dels[i]})
	}
	for i := range ups {
		add(ups[i].User, alteration{up: &ups[i]})
	}
	out := make(map[string]error, len(byUser))
	for _, user := range order {
		out[user] = s.alterUser(ctx, user, byUser[user])
	}
	return out
}

// alteration is one deletion or upsertion.
type alteration struct {
	del *Deletion
	up  *Upsertion
}

func (s *Store) alterUser(ctx context.Context, user string, as []alteration) error {
	if user == "" {
		return fmt.Errorf("%w: username must not be empty", ErrUnacceptable)
	}
	mechs := map[int8]bool{}
	var cmps []meta.Compare
	var ops []meta.Op
	for _, a := range as {
		var m int8
		if a.del != nil {
			m = a.del.Mechanism
		} else {
			m = a.up.Mechanism
		}
		if MechanismName(m) == "" {
			return fmt.Errorf("%w: unknown SCRAM mechanism %d", ErrUnsupportedMechanism, m)
		}
		if mechs[m] {
			return fmt.Errorf("%w: a user credential cannot be altered more than once in the same request (%s, %s)", ErrDuplicate, user, MechanismName(m))
		}
		mechs[m] = true
		key := credKey(user, m)
		if a.del != nil {
			kv, err := s.md.Get(ctx, key)
			if errors.Is(err, meta.ErrNotFound) {
				return fmt.Errorf("%w: attempt to delete a user credential that does not exist: %s %s", ErrNotFound, user, MechanismName(m))
			}
			if err != nil {
				return fmt.Errorf("%w: %v", ErrStorage, err)
			}
			cmps = append(cmps, meta.Compare{Key: key, Version: kv.Version})
			ops = append(ops, meta.Delete(key))
			continue
		}
		u := a.up
		switch {
		case u.Iterations < MinIterations:
			return fmt.Errorf("%w: too few iterations: %d, the minimum is %d", ErrUnacceptable, u.Iterations, MinIterations)
		case u.Iterations > MaxIterations:
			return fmt.Errorf("%w: too many iterations: %d, the maximum is %d", ErrUnacceptable, u.Iterations, MaxIterations)
		case len(u.Salt) == 0 || len(u.SaltedPassword) == 0:
			return fmt.Errorf("%w: salt and salted password must not be empty", ErrUnacceptable)
		}
		b, _ := json.Marshal(derive(u))
		ops = append(ops, meta.Put(key, b))
	}
	if err := s.md.Txn(ctx, cmps, ops...); err != nil {
		if errors.Is(err, meta.ErrConflict) {
			return fmt.Errorf("%w: deleted concurrently: %s", ErrNotFound, user)
		}
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

// decode reads a stored credential back; ok is false (and the record
// skipped) for anything malformed: a bad key, bad JSON, an unknown
// mechanism or one that disagrees with the key.
func decode(key string, value []byte) (string, Credential, bool) {
	rest, ok := strings.CutPrefix(key, prefix)
	if !ok {
		return "", Credential{}, false
	}
	esc, mech, ok := strings.Cut(rest, "/")
	if !ok {
		return "", Credential{}, false
	}
	user, err := url.PathUnescape(esc)
	if err != nil {
		return "", Credential{}, false
	}
	var c Credential
	if json.Unmarshal(value, &c) != nil || MechanismName(c.Mechanism) == "" || mech != fmt.Sprint(c.Mechanism) {
		return "", Credential{}, false
	}
	return user, c, true
}

// derive turns an upsertion into the stored credential (RFC 5802).
func derive(u *Upsertion) Credential {
	h := hashOf(u.Mechanism)
	mac := func(key []byte, msg string) []byte {
		m := hmac.New(h, key)
		m.Write([]byte(msg))
		return m.Sum(nil)
	}
	clientKey := mac(u.SaltedPassword, "Client Key")
	stored := h()
	stored.Write(clientKey)
	return Credential{
		Mechanism:  u.Mechanism,
		Iterations: u.Iterations,
		Salt:       append([]byte(nil), u.Salt...),
		StoredKey:  stored.Sum(nil),
		ServerKey:  mac(u.SaltedPassword, "Server Key"),
	}
}
