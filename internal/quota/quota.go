// Package quota implements Kafka's client quotas (KIP-13, KIP-55, KIP-546):
// byte-rate limits on producing and fetching, set per user, per client id
// or per (user, client id), with defaults, stored in the metadata store and
// enforced by each broker on its own traffic, as Kafka enforces them.
//
// A client over its quota is not refused: the broker answers with a
// throttle time and holds the connection back for that long (the
// transport's job; Throttle only computes it).
package quota

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Entity types.
const (
	User     = "user"
	ClientID = "client-id"
	IP       = "ip"
)

// Quota keys sluice enforces.
const (
	ProducerByteRate = "producer_byte_rate"
	ConsumerByteRate = "consumer_byte_rate"
)

// ErrInvalid is returned (wrapped) for an entity or key Kafka would refuse
// with INVALID_REQUEST, or a quota sluice does not enforce.
var ErrInvalid = errors.New("quota: invalid request")

// Component is one part of an entity: a type and a name, or the type's
// default (Name nil).
type Component struct {
	Type string
	Name *string
}

// Entity is a set of components with distinct types, kept sorted by type.
type Entity []Component

// Normalize sorts e by type and checks it is an entity Kafka accepts: user,
// client-id, or both.
func (e Entity) Normalize() (Entity, error) {
	out := slices.Clone(e)
	slices.SortFunc(out, func(a, b Component) int { return strings.Compare(a.Type, b.Type) })
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: empty quota entity", ErrInvalid)
	}
	for i, c := range out {
		switch c.Type {
		case User, ClientID:
		case IP:
			return nil, fmt.Errorf("%w: ip quotas (connection_creation_rate) are not enforced by sluice", ErrInvalid)
		default:
			return nil, fmt.Errorf("%w: unknown quota entity type %q", ErrInvalid, c.Type)
		}
		if i > 0 && out[i-1].Type == c.Type {
			return nil, fmt.Errorf("%w: duplicate entity type %q", ErrInvalid, c.Type)
		}
	}
	return out, nil
}

// key encodes a normalized entity as a metadata key suffix:
// "client-id=<name>" or "user=<name>/client-id=<default>", names escaped.
func (e Entity) key() string {
	parts := make([]string, len(e))
	for i, c := range e {
		name := "<default>"
		if c.Name != nil {
			name = escape(*c.Name)
		}
		parts[i] = c.Type + "=" + name
	}
	return strings.Join(parts, "/")
}

func parseKey(k string) (Entity, error) {
	var e Entity
	for _, part := range strings.Split(k, "/") {
		typ, name, ok := strings.Cut(part, "=")
		if !ok {
			return nil, fmt.Errorf("bad quota entity key %q", k)
		}
		c := Component{Type: typ}
		if name != "<default>" {
			n, err := unescape(name)
			if err != nil {
				return nil, fmt.Errorf("bad quota entity key %q: %v", k, err)
			}
			c.Name = &n
		}
		e = append(e, c)
	}
	return e.Normalize()
}

// escape keeps '/', '=', '%' and '<' out of names used in keys.
func escape(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '/', '=', '%', '<':
			fmt.Fprintf(&b, "%%%02X", c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func unescape(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errors.New("truncated escape")
		}
		c, err := strconv.ParseUint(s[i+1:i+3], 16, 8)
		if err != nil {
			return "", fmt.Errorf("bad escape %q", s[i:i+3])
		}
		b.WriteByte(byte(c))
		i += 2
	}
	return b.String(), nil
}

// knownKey reports whether key is one of Kafka's client quota keys.
func knownKey(key string) bool {
	switch key {
	case ProducerByteRate, ConsumerByteRate, "request_percentage", "controller_mutation_rate", "connection_creation_rate":
		return true
	}
	return false
}

// CheckValue validates a quota key and value as Kafka does for the keys
// sluice enforces: byte rates are positive whole numbers.
func CheckValue(key string, v float64) error {
	switch key {
	case ProducerByteRate, ConsumerByteRate:
		if v <= 0 || v != math.Trunc(v) || v > math.MaxInt64 {
			return fmt.Errorf("%w: %s must be a positive whole number of bytes per second, got %v", ErrInvalid, key, v)
		}
		return nil
	case "request_percentage", "controller_mutation_rate", "connection_creation_rate":
		return fmt.Errorf("%w: %s is not enforced by sluice (producer_byte_rate and consumer_byte_rate are)", ErrInvalid, key)
	}
	return fmt.Errorf("%w: unknown quota key %q", ErrInvalid, key)
}
