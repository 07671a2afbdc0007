package quota

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/meta"
)

// keyPrefix is where quotas live in the metadata store, one record per
// entity: JSON {"<quota key>": value, ...} (docs/formats.md).
const keyPrefix = "/quotas/"

// Manager holds the cluster's quotas and this broker's usage of them. It
// is safe for concurrent use.
type Manager struct {
	md     meta.Store
	logger *slog.Logger
	now    func() time.Time

	mu     sync.RWMutex
	quotas map[string]entry // by Entity.key()

	smu     sync.Mutex
	sensors map[string]*rate // by quota key and the client's matched entity
}

type entry struct {
	entity Entity
	values map[string]float64
}

// New returns a Manager over md. Call Load before use.
func New(md meta.Store, logger *slog.Logger) *Manager {
	return &Manager{md: md, logger: logger, now: time.Now, quotas: map[string]entry{}, sensors: map[string]*rate{}}
}

// Load reads every stored quota.
func (m *Manager) Load(ctx context.Context) error {
	kvs, err := m.md.List(ctx, keyPrefix)
	if err != nil {
		return fmt.Errorf("reading client quotas: %w", err)
	}
	m.sync(kvs)
	return nil
}

// Watch keeps the quotas in step with changes made through other brokers
// until ctx ends; with a store that cannot watch (a single node, the only
// writer) it returns at once.
func (m *Manager) Watch(ctx context.Context) {
	meta.FollowKeys(ctx, m.md, keyPrefix, m.logger, m.sync, m.apply)
}

// sync replaces every quota with kvs at once: requests meanwhile see either
// the old quotas or the new ones, never none.
func (m *Manager) sync(kvs []meta.KV) {
	quotas := make(map[string]entry, len(kvs))
	for _, kv := range kvs {
		k := strings.TrimPrefix(kv.Key, keyPrefix)
		if e, ok := m.parse(k, kv.Value); ok {
			quotas[k] = e
		}
	}
	m.mu.Lock()
	m.quotas = quotas
	m.mu.Unlock()
}

// apply installs one entity's stored record (nil: removed).
func (m *Manager) apply(k string, v []byte) {
	e, ok := m.parse(k, v)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		m.quotas[k] = e
	} else {
		delete(m.quotas, k)
	}
}

// parse decodes a stored record; false for a removed (nil) or bad one.
func (m *Manager) parse(k string, v []byte) (entry, bool) {
	if v == nil {
		return entry{}, false
	}
	e, err := parseKey(k)
	if err != nil {
		m.logger.Error("bad client quota record; ignored", "key", k, "err", err)
		return entry{}, false
	}
	vals := map[string]float64{}
	if err := json.Unmarshal(v, &vals); err != nil {
		m.logger.Error("bad client quota record; ignored", "key", k, "err", err)
		return entry{}, false
	}
	return entry{entity: e, values: vals}, true
}

// Op changes one quota key of an entity: sets Value, or removes the key.
type Op struct {
	Key    string
	Value  float64
	Remove bool
}

// Alter applies ops to entity's quotas, atomically and durably.
func (m *Manager) Alter(ctx context.Context, entity Entity, ops []Op, validateOnly bool) error {
	e, err := entity.Normalize()
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if seen[op.Key] {
			return fmt.Errorf("%w: quota key %q appears twice", ErrInvalid, op.Key)
		}
		seen[op.Key] = true
		if op.Remove {
			// Removing a Kafka key sluice never stores is a no-op.
			if !knownKey(op.Key) {
				return fmt.Errorf("%w: unknown quota key %q", ErrInvalid, op.Key)
			}
			continue
		}
		if err := CheckValue(op.Key, op.Value); err != nil {
			return err
		}
	}
	if validateOnly {
		return nil
	}
	k := e.key()
	m.mu.Lock()
	defer m.mu.Unlock()
	next := maps.Clone(m.quotas[k].values)
	if next == nil {
		next = map[string]float64{}
	}
	for _, op := range ops {
		if op.Remove {
			delete(next, op.Key)
		} else {
			next[op.Key] = op.Value
		}
	}
	op := meta.Delete(keyPrefix + k)
	if len(next) > 0 {
		v, _ := json.Marshal(next)
		op = meta.Put(keyPrefix+k, v)
	}
	if err := m.md.Txn(ctx, nil, op); err != nil {
		return fmt.Errorf("storing client quotas: %w", err)
	}
	if len(next) == 0 {
		delete(m.quotas, k)
	} else {
		m.quotas[k] = entry{entity: e, values: next}
	}
	return nil
}

// Match says how a Filter component picks entities.
type Match int8

// Kafka's match types.
const (
	MatchExact   Match = 0 // the named entity
	MatchDefault Match = 1 // the type's default entity
	MatchAny     Match = 2 // any entity with the type
)

// Filter is one component of a DescribeClientQuotas filter.
type Filter struct {
	Type  string
	Match Match
	Name  string // for MatchExact
}

// Described is one entity's quotas.
type Described struct {
	Entity Entity
	Values map[string]float64
}

// Describe lists the entities matching every filter component; strict
// also excludes entities with types the filter does not name.
func (m *Manager) Describe(filters []Filter, strict bool) ([]Described, error) {
	types := map[string]bool{}
	for _, f := range filters {
		if f.Type != User && f.Type != ClientID && f.Type != IP {
			return nil, fmt.Errorf("%w: unknown quota entity type %q", ErrInvalid, f.Type)
		}
		if types[f.Type] {
			return nil, fmt.Errorf("%w: entity type %q appears twice in the filter", ErrInvalid, f.Type)
		}
		if f.Match < MatchExact || f.Match > MatchAny {
			return nil, fmt.Errorf("%w: unknown match type %d", ErrInvalid, f.Match)
		}
		types[f.Type] = true
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	var out []Described
	for _, en := range m.quotas {
		if matches(en.entity, filters, types, strict) {
			out = append(out, Described{Entity: slices.Clone(en.entity), Values: maps.Clone(en.values)})
		}
	}
	slices.SortFunc(out, func(a, b Described) int { return strings.Compare(a.Entity.key(), b.Entity.key()) })
	return out, nil
}

func matches(e Entity, filters []Filter, types map[string]bool, strict bool) bool {
	for _, f := range filters {
		i := slices.IndexFunc(e, func(c Component) bool { return c.Type == f.Type })
		if i < 0 {
			return false
		}
		c := e[i]
		switch f.Match {
		case MatchExact:
			if c.Name == nil || *c.Name != f.Name {
				return false
			}
		case MatchDefault:
			if c.Name != nil {
				return false
			}
		}
	}
	if strict {
		for _, c := range e {
			if !types[c.Type] {
				return false
			}
		}
	}
	return true
}

// Throttle records n bytes of key's traffic (ProducerByteRate or
// ConsumerByteRate) by a client, and returns how long the client must be
// held back, 0 if it is within its quota or has none. Quotas resolve as in
// Kafka, most specific first: (user, client-id), (user, default
// client-id), user, (default user, client-id), (default user, default
// client-id), default user, client-id, default client-id. Clients matched
// through the same entity share its rate (all clients of a user quota),
// except that each name matched by a default gets its own.
func (m *Manager) Throttle(key, user, clientID string, n int) time.Duration {
	bound, sensorKey, ok := m.resolve(key, user, clientID)
	if !ok {
		return 0
	}
	now := m.now()
	m.smu.Lock()
	r := m.sensors[sensorKey]
	if r == nil {
		if len(m.sensors) > 10000 {
			m.expireSensorsLocked(now)
		}
		r = &rate{}
		m.sensors[sensorKey] = r
	}
	m.smu.Unlock()
	return r.recordAndThrottle(now, float64(n), bound)
}

// expireSensorsLocked forgets the rates of clients idle for an hour.
func (m *Manager) expireSensorsLocked(now time.Time) {
	for k, r := range m.sensors {
		if r.idleSince(now) > time.Hour {
			delete(m.sensors, k)
		}
	}
}

func (m *Manager) resolve(key, user, clientID string) (float64, string, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if len(m.quotas) == 0 {
		return 0, "", false
	}
	u, c := &user, &clientID
	type level struct {
		hasUser, hasClient   bool
		userName, clientName *string // nil: the default entity
	}
	levels := []level{
		{true, true, u, c}, {true, true, u, nil}, {true, false, u, nil},
		{true, true, nil, c}, {true, true, nil, nil}, {true, false, nil, nil},
		{false, true, nil, c}, {false, true, nil, nil},
	}
	for _, l := range levels {
		var e Entity
		if l.hasClient {
			e = append(e, Component{Type: ClientID, Name: l.clientName})
		}
		if l.hasUser {
			e = append(e, Component{Type: User, Name: l.userName})
		}
		en, ok := m.quotas[e.key()]
		if !ok {
			continue
		}
		v, ok := en.values[key]
		if !ok {
			continue
		}
		// The rate is shared by everyone matching this entity by name,
		// and kept per name where a default matched.
		sk := key
		if l.hasUser {
			sk += "\x00user=" + user
		}
		if l.hasClient {
			sk += "\x00client-id=" + clientID
		}
		return v, sk, true
	}
	return 0, "", false
}
