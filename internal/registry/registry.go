package registry

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/sluice-mq/sluice/internal/schema"
)

// Store is the _schemas topic as the registry uses it.
type Store interface {
	// Fetch returns the records from offset on, waiting a while when
	// there are none, and next, the offset after the last returned.
	Fetch(ctx context.Context, offset int64) (recs []Record, next int64, err error)
	// Latest is the topic's high watermark, asked of any broker.
	Latest(ctx context.Context) (int64, error)
	// Append makes recs durable, in one batch, and returns the offset
	// after the last; ErrNotLeader when this broker does not lead the
	// topic.
	Append(ctx context.Context, recs []Record) (int64, error)
	// End is the topic's high watermark; ErrNotLeader as Append.
	End(ctx context.Context) (int64, error)
}

// Forwarder finds the registry of the broker leading _schemas (cluster
// mode; nil on a single node, which leads it always).
type Forwarder interface {
	// LeaderURL is the leader's registry base URL, e.g. http://h:8081;
	// ErrNoLeader while no other broker leads the topic (none does, or
	// this one is taking it over).
	LeaderURL(ctx context.Context) (string, error)
}

// ErrNoLeader: no other broker leads _schemas at the moment.
var ErrNoLeader = errors.New("registry: no other broker leads " + Topic + " at the moment")

// Config tunes the registry.
type Config struct {
	// MaxBodyBytes bounds a request body (a schema and its envelope).
	MaxBodyBytes int64
	// BodyBudgetBytes bounds the bodies all requests hold at once: past
	// it, requests wait to read theirs.
	BodyBudgetBytes int64
	// WriteTimeout bounds a write: catching up, appending, applying.
	WriteTimeout time.Duration
	// ForwardTLS, when set, is the client TLS configuration writes are
	// forwarded to the leader's registry with (its listener serves TLS).
	ForwardTLS *tls.Config
	// ClusterID is the Kafka cluster's id, as GET /v1/metadata/id names it.
	ClusterID string
}

// DefaultConfig is the default configuration.
func DefaultConfig() Config {
	return Config{MaxBodyBytes: 8 << 20, BodyBudgetBytes: 64 << 20, WriteTimeout: 30 * time.Second}
}

// SchemaInfo is a registered schema as SchemaByID returns it; shared,
// never modified.
type SchemaInfo struct {
	ID         int
	Type       schema.Type
	Schema     string
	References []Reference
	// Parsed is the schema parsed, with its references; nil when this
	// build cannot parse it. The produce-side checks take record names
	// and payload decoders from it (internal/schemacheck).
	Parsed *schema.Schema
}

type subjectID struct {
	subject string
	id      int
}

// Registry is the schema registry of one broker.
type Registry struct {
	cfg   Config
	store Store
	fwd   Forwarder
	log   *slog.Logger
	http  httpClient
	// bodies is the budget of request bodies held at once.
	bodies *semaphore.Weighted

	writeMu sync.Mutex // one write at a time (leader side); before mu

	mu      sync.RWMutex
	st      *state
	applied int64         // offset after the last record applied; mu
	moved   chan struct{} // closed and replaced when applied moves; mu

	// The produce path's lookups, kept beside st so that they take no
	// lock: id -> *SchemaInfo, and subjectID -> struct{} for every
	// subject with a live version of the id.
	ids   sync.Map
	under sync.Map

	ready     chan struct{} // closed once caught up with the topic once
	readyOnce sync.Once
	closed    atomic.Bool
}

// New makes a registry over store; fwd is nil on a single node. Run
// tails the topic.
func New(cfg Config, store Store, fwd Forwarder, logger *slog.Logger) *Registry {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = DefaultConfig().MaxBodyBytes
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = DefaultConfig().WriteTimeout
	}
	cfg.BodyBudgetBytes = max(cfg.BodyBudgetBytes, cfg.MaxBodyBytes)
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Registry{cfg: cfg, store: store, fwd: fwd, log: logger, st: newState(), moved: make(chan struct{}),
		ready: make(chan struct{}), http: newHTTPClient(cfg.ForwardTLS), bodies: semaphore.NewWeighted(cfg.BodyBudgetBytes)}
}

// Run applies _schemas to the state until ctx ends.
func (r *Registry) Run(ctx context.Context) {
	backoff := 50 * time.Millisecond
	retry := func(what string, err error) bool {
		if ctx.Err() != nil {
			return false
		}
		r.log.Warn("schema registry: "+what+" failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return false
		}
		backoff = min(2*backoff, 2*time.Second)
		return true
	}
	// Loaded once every record there was at the start is applied.
	var target int64
	for {
		hw, err := r.store.Latest(ctx)
		if err == nil {
			target = hw
			break
		}
		if !retry("reading the end of "+Topic, err) {
			return
		}
	}
	for ctx.Err() == nil {
		r.mu.RLock()
		off := r.applied
		r.mu.RUnlock()
		if off >= target {
			r.readyOnce.Do(func() {
				r.log.Info("schema registry loaded", "offset", off)
				close(r.ready)
			})
		}
		recs, next, err := r.store.Fetch(ctx, off)
		if err != nil {
			if !retry("reading "+Topic, err) {
				return
			}
			continue
		}
		backoff = 50 * time.Millisecond
		r.applyAll(recs, next)
	}
}

// applyAll applies recs and moves applied to next.
func (r *Registry) applyAll(recs []Record, next int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, rec := range recs {
		if rec.Offset < r.applied {
			continue
		}
		c, err := decodeRecord(rec.Key, rec.Value)
		if err != nil {
			r.log.Warn("schema registry: skipping a record", "offset", rec.Offset, "err", err)
			continue
		}
		r.apply(c)
	}
	if next > r.applied {
		r.applied = next
		close(r.moved)
		r.moved = make(chan struct{})
	}
}

// apply applies one change. mu held.
func (r *Registry) apply(c change) {
	st := r.st
	switch c.kind {
	case keySchema:
		vs := st.subjects[c.subject]
		i, found := slicesSearch(vs, c.version)
		var old *version
		if found {
			old = vs[i]
		}
		if c.schema == nil {
			if old != nil {
				st.subjects[c.subject] = append(vs[:i:i], vs[i+1:]...)
				if len(st.subjects[c.subject]) == 0 {
					delete(st.subjects, c.subject)
				}
				r.release(old.id)
				r.reindex(c.subject, old.id)
			}
			return
		}
		v := c.schema
		t, err := schema.ParseType(v.SchemaType)
		if err != nil {
			t = schema.Type(v.SchemaType) // kept, unparsed, by a build without the format
		}
		if st.schemas[v.ID] == nil {
			ct := st.newContent(v.ID, t, v.Schema, v.References)
			st.schemas[v.ID] = ct
			if _, taken := st.byKey[ct.key]; !taken {
				st.byKey[ct.key] = v.ID
			}
			r.ids.Store(v.ID, ct.info)
		}
		st.maxID = max(st.maxID, v.ID)
		nv := &version{version: v.Version, id: v.ID, deleted: v.Deleted}
		if old != nil {
			vs[i] = nv
			if old.id != v.ID {
				r.release(old.id)
				st.schemas[v.ID].uses++
				r.reindex(c.subject, old.id)
			}
		} else {
			st.subjects[c.subject] = append(vs[:i:i], append([]*version{nv}, vs[i:]...)...)
			st.schemas[v.ID].uses++
		}
		r.reindex(c.subject, v.ID)
	case keyConfig:
		if c.level == "" {
			delete(st.configs, c.subject)
		} else if l, err := schema.ParseLevel(c.level); err == nil {
			st.configs[c.subject] = l
		}
	case keyMode:
		if c.mode == "" {
			delete(st.modes, c.subject)
		} else {
			st.modes[c.subject] = c.mode
		}
	case keyMaxID:
		st.maxID = max(st.maxID, c.maxID)
	}
}

func slicesSearch(vs []*version, v int) (int, bool) {
	lo, hi := 0, len(vs)
	for lo < hi {
		m := (lo + hi) / 2
		if vs[m].version < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(vs) && vs[lo].version == v
}

// release drops one use of id; the last one removes the schema. mu held.
func (r *Registry) release(id int) {
	c := r.st.schemas[id]
	if c == nil {
		return
	}
	if c.uses--; c.uses > 0 {
		return
	}
	delete(r.st.schemas, id)
	if r.st.byKey[c.key] == id {
		delete(r.st.byKey, c.key)
	}
	r.ids.Delete(id)
}

// reindex sets whether subject has a live version of id. mu held.
func (r *Registry) reindex(subject string, id int) {
	r.st.indexUse(subject, id)
	for _, v := range r.st.subjects[subject] {
		if v.id == id && !v.deleted {
			r.under.Store(subjectID{subject, id}, struct{}{})
			return
		}
	}
	r.under.Delete(subjectID{subject, id})
}

// SchemaByID is the schema registered with id, without taking a lock
// (the produce path's check of a record's schema id).
func (r *Registry) SchemaByID(id int) (*SchemaInfo, bool) {
	v, ok := r.ids.Load(id)
	if !ok {
		return nil, false
	}
	return v.(*SchemaInfo), true
}

// RegisteredUnder reports, without taking a lock, whether id is the id of
// a version of subject that is not soft-deleted.
func (r *Registry) RegisteredUnder(subject string, id int) bool {
	_, ok := r.under.Load(subjectID{subject, id})
	return ok
}

// Ready is closed once the registry has caught up with _schemas after
// starting.
func (r *Registry) Ready() <-chan struct{} { return r.ready }

// waitApplied waits until the state has applied every record before
// offset.
func (r *Registry) waitApplied(ctx context.Context, offset int64) error {
	for {
		r.mu.RLock()
		done, ch := r.applied >= offset, r.moved
		r.mu.RUnlock()
		if done {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// waitReady waits for the first catch-up (reads before it would miss
// schemas that exist).
func (r *Registry) waitReady(ctx context.Context) *Error {
	select {
	case <-r.ready:
		return nil
	case <-ctx.Done():
		return errTimeout("the schema registry is still loading " + Topic)
	}
}

// write runs one write on the leader: after catching up with the topic,
// decide (under the state's read lock) returns the records to append and
// the answer; the answer is returned once the state has applied them.
// Writes are serialised, so decide sees every earlier write.
func (r *Registry) write(ctx context.Context, decide func(st *state) ([]Record, any, *Error)) (any, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.WriteTimeout)
	defer cancel()
	r.writeMu.Lock()
	defer r.writeMu.Unlock()
	end, err := r.store.End(ctx)
	if err != nil {
		return nil, 0, err
	}
	if err := r.waitApplied(ctx, end); err != nil {
		return nil, 0, errTimeout(fmt.Sprintf("catching up with %s to offset %d", Topic, end))
	}
	r.mu.RLock()
	recs, answer, e := decide(r.st)
	next := r.applied
	r.mu.RUnlock()
	if e != nil {
		return nil, 0, e
	}
	if len(recs) == 0 {
		return answer, next, nil
	}
	next, err = r.store.Append(ctx, recs)
	if errors.Is(err, ErrNotLeader) {
		return nil, 0, err
	}
	if err != nil {
		return nil, 0, errStore(err)
	}
	if err := r.waitApplied(ctx, next); err != nil {
		return nil, 0, errTimeout(fmt.Sprintf("applying %s up to offset %d", Topic, next))
	}
	return answer, next, nil
}
