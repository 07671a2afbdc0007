// Package schemacheck is the broker-side schema validation of issue 21
// (docs/schema-registry.md): a topic with sluice.value.schema.validation=
// true (or sluice.key.schema.validation=true, or whose name matches
// governance.schema_required) takes only records whose value (key) is in
// the Confluent wire format (magic byte 0, a 4-byte schema id, for
// Protobuf the message indexes) with an id registered in the broker's
// schema registry under the subject the topic's subject name strategy
// gives: TopicNameStrategy "<topic>-value", RecordNameStrategy the
// schema's record name, TopicRecordNameStrategy "<topic>-<record name>".
// With sluice.value.schema.validation.decode=true the data after the
// header must also decode with that schema. A batch with any other record
// is refused whole with INVALID_RECORD and a message naming the record and
// why. Null values (tombstones) and null keys pass.
//
// Records are walked in place (batch.WalkRecords; compressed batches
// streamed under the broker's decompression budget), and a run of records
// with the same schema id costs one registry lookup: the id check
// allocates nothing per record.
//
// It owns the check and the per-schema compiled form (record names,
// decoders). It does not own the registry (internal/registry), the topic
// configs' definitions (internal/topicconfig) or the produce path
// (internal/kafka).
package schemacheck

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/registry"
)

// The topic configs of the check (internal/topicconfig defines them).
const (
	ValueConfig         = "sluice.value.schema.validation"
	KeyConfig           = "sluice.key.schema.validation"
	ValueDecodeConfig   = "sluice.value.schema.validation.decode"
	KeyDecodeConfig     = "sluice.key.schema.validation.decode"
	ValueStrategyConfig = "sluice.value.subject.name.strategy"
	KeyStrategyConfig   = "sluice.key.subject.name.strategy"
)

// Registry is what the check asks of the schema registry
// (registry.Registry; both lock-free).
type Registry interface {
	// RegisteredUnder: id is a live version of subject.
	RegisteredUnder(subject string, id int) bool
	// SchemaByID is the schema of id.
	SchemaByID(id int) (*registry.SchemaInfo, bool)
}

// Topics gives a topic's config overrides.
type Topics interface {
	Topic(name string) (log.TopicInfo, bool)
}

// Partition walks the records of one of a partition's batches
// (log.Partition).
type Partition interface {
	WalkRecords(ctx context.Context, h *batch.Header, b []byte, fn batch.WalkFunc) error
}

// ErrInvalid is a record that does not carry a schema registered for the
// topic.
var ErrInvalid = errors.New("schema validation")

// Options are the broker-wide settings of the check.
type Options struct {
	// SchemaRequired reports whether the value validation of a topic
	// defaults to true (governance.schema_required: see Required); nil:
	// no topic's does.
	SchemaRequired func(topic string) bool
	// TopicDefaults are the broker-level topic config defaults
	// (topic_defaults, and dynamic ones): a topic without an override of a
	// config of the check takes the broker's (after SchemaRequired); nil:
	// none.
	TopicDefaults func() map[string]string
}

// Checker validates produced batches. Its registry is set once the
// registry runs (SetRegistry); until then, and when the broker runs
// without a registry, a validating topic refuses every record.
type Checker struct {
	topics  Topics
	opts    Options
	reg     atomic.Pointer[Registry]
	schemas sync.Map // id -> *compiled
	flight  singleflight.Group
}

// New returns a checker reading topic configs from topics.
func New(topics Topics, opts Options) *Checker { return &Checker{topics: topics, opts: opts} }

// SetRegistry sets the registry ids are checked against.
func (c *Checker) SetRegistry(r Registry) { c.reg.Store(&r) }

// Required returns the matcher of governance.schema_required: whether a
// topic's name matches one of patterns (internal topics never do),
// remembered per name. nil when there are no patterns.
func Required(patterns []*regexp.Regexp) func(topic string) bool {
	if len(patterns) == 0 {
		return nil
	}
	var seen sync.Map // topic name -> bool
	return func(topic string) bool {
		if log.IsInternalTopic(topic) {
			return false
		}
		if v, ok := seen.Load(topic); ok {
			return v.(bool)
		}
		m := false
		for _, re := range patterns {
			if re.MatchString(topic) {
				m = true
				break
			}
		}
		seen.Store(topic, m)
		return m
	}
}

// side is the check of a record's value or key for one Check call, with
// the memo of the last schema id (and Protobuf message indexes) found
// registered: a run of records with the same id costs one lookup.
type side struct {
	on, decode bool
	strategy   Strategy
	what       string // "value" or "key"
	subject    string // TopicNameStrategy's subject

	lastID  int
	lastIdx []byte
	lastCP  *compiled
}

// side resolves one side's configs: the topic's override, else (for the
// value's validation) true under governance.schema_required, else the
// broker's default, else the built-in one (off, TopicNameStrategy).
func (c *Checker) side(topic, what string, configs, defaults map[string]string, on, decode, strategy string, required bool) side {
	s := side{what: what, lastID: -1}
	get := func(k string) (string, bool) {
		if v, ok := configs[k]; ok {
			return v, true
		}
		v, ok := defaults[k]
		return v, ok
	}
	v, set := configs[on]
	switch {
	case set:
		s.on = v == "true"
	case required:
		s.on = true
	default:
		v, _ = get(on)
		s.on = v == "true"
	}
	v, _ = get(decode)
	s.decode = v == "true"
	s.on = s.on || s.decode
	v, _ = get(strategy)
	s.strategy, _ = ParseStrategy(v) // validated when set
	if s.on {
		s.subject = topic + "-" + what
	}
	return s
}

// Check validates records (whole batches) produced to topic's partition p;
// nil when the topic does not validate. A payload that does not frame is
// let through: the log's own validation refuses it with its own error.
func (c *Checker) Check(ctx context.Context, topic string, p *log.Partition, records []byte) error {
	return c.checkCaughtUp(ctx, topic, p, records)
}

// checkCaughtUp is Check over any Partition.
func (c *Checker) checkCaughtUp(ctx context.Context, topic string, p Partition, records []byte) error {
	err := c.check(ctx, topic, p, records)
	var u unknownID
	if err == nil || !errors.As(err, &u) {
		return err
	}
	// A schema registered through another broker a moment ago may not
	// have reached this broker's copy of the registry yet: catch up with
	// _schemas (one catch-up at a time, shared by every waiting produce)
	// and check again before refusing.
	if !c.catchUp(ctx) {
		return err
	}
	return c.check(ctx, topic, p, records)
}

// catchUpWait bounds how long a produce waits for the registry to catch
// up before its batch is refused.
const catchUpWait = 5 * time.Second

// catchUp brings the registry up to date with _schemas; false when it
// cannot (no registry that catches up, or it took too long).
func (c *Checker) catchUp(ctx context.Context) bool {
	rp := c.reg.Load()
	if rp == nil {
		return false
	}
	cu, ok := (*rp).(interface{ CatchUp(context.Context) error })
	if !ok {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, catchUpWait)
	defer cancel()
	ch := c.flight.DoChan("catchup", func() (any, error) {
		cctx, ccancel := context.WithTimeout(context.Background(), catchUpWait)
		defer ccancel()
		return nil, cu.CatchUp(cctx)
	})
	select {
	case res := <-ch:
		return res.Err == nil
	case <-ctx.Done():
		return false
	}
}

func (c *Checker) check(ctx context.Context, topic string, p Partition, records []byte) error {
	t, ok := c.topics.Topic(topic)
	if !ok {
		return nil
	}
	var defaults map[string]string
	if c.opts.TopicDefaults != nil {
		defaults = c.opts.TopicDefaults()
	}
	val := c.side(topic, "value", t.Configs, defaults, ValueConfig, ValueDecodeConfig, ValueStrategyConfig,
		c.opts.SchemaRequired != nil && c.opts.SchemaRequired(topic))
	key := c.side(topic, "key", t.Configs, defaults, KeyConfig, KeyDecodeConfig, KeyStrategyConfig, false)
	if !val.on && !key.on {
		return nil
	}
	rp := c.reg.Load()
	if rp == nil {
		return fmt.Errorf("%w: topic %s validates schemas but this broker runs no schema registry (schema_registry.listen)", ErrInvalid, topic)
	}
	k := check{c: c, reg: *rp, topic: topic}
	n := 0
	var bad error
	fn := func(_ int32, _ int64, kb, vb, _ []byte) error {
		if val.on && vb != nil {
			if err := k.record(&val, vb); err != nil {
				bad = fmt.Errorf("%w: record %d of the batch: %w", ErrInvalid, n, err)
				return errStop
			}
		}
		if key.on && kb != nil {
			if err := k.record(&key, kb); err != nil {
				bad = fmt.Errorf("%w: record %d of the batch: %w", ErrInvalid, n, err)
				return errStop
			}
		}
		n++
		return nil
	}
	for b := records; len(b) >= batch.HeaderSize; {
		h, err := batch.ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return nil
		}
		bt := b[:h.Size()]
		b = b[h.Size():]
		if h.IsControl() {
			continue
		}
		if err := p.WalkRecords(ctx, &h, bt, fn); err != nil {
			switch {
			case bad != nil:
				return bad
			case errors.Is(err, batch.ErrCorrupt) || errors.Is(err, batch.ErrTooLarge):
				return nil // the append refuses the batch with its own error
			}
			// Not checked (the request ended, the decompression budget
			// was not to be had): not taken either.
			return fmt.Errorf("%w: the batch could not be checked: %v", ErrInvalid, err)
		}
	}
	return nil
}

var errStop = errors.New("stop")

// unknownID is a record whose schema id this broker's registry does not
// know (under the subject): refused only after catching up.
type unknownID struct{ msg string }

func (e unknownID) Error() string { return e.msg }

// check is one Check call's view of the registry.
type check struct {
	c     *Checker
	reg   Registry
	topic string
}

// record checks one value or key.
func (k *check) record(s *side, b []byte) error {
	id, rest, ok := wireHeader(b)
	if !ok {
		return fmt.Errorf("the %s is not in the schema registry's wire format (magic byte 0 and a 4-byte schema id)", s.what)
	}
	if s.strategy == TopicName && !s.decode {
		if id == s.lastID {
			return nil
		}
		if !k.reg.RegisteredUnder(s.subject, id) {
			return unknownID{fmt.Sprintf("the %s's schema id %d is not registered under subject %s", s.what, id, s.subject)}
		}
		s.lastID = id
		return nil
	}
	cp := s.lastCP
	if id != s.lastID || cp == nil {
		cp = k.compiled(id)
		if cp == nil {
			return unknownID{fmt.Sprintf("the %s's schema id %d is not registered", s.what, id)}
		}
	}
	if cp.err != nil {
		return fmt.Errorf("the %s's %v", s.what, cp.err)
	}
	var (
		md   protoreflect.MessageDescriptor
		idx  []byte
		data = rest
	)
	if cp.proto != nil {
		var path [maxIndexes]int32
		np, x, d, err := messageIndexes(rest, &path)
		if err != nil {
			return fmt.Errorf("the %s's schema id %d is Protobuf, but %v", s.what, id, err)
		}
		idx, data = x, d
		if md, err = cp.message(path[:np]); err != nil {
			return fmt.Errorf("the %s: %v", s.what, err)
		}
	}
	if id != s.lastID || string(idx) != string(s.lastIdx) || s.lastCP == nil {
		subject := s.subject
		if s.strategy != TopicName {
			name, err := cp.recordName(md)
			if err != nil {
				return fmt.Errorf("the %s's subject under %s: %v", s.what, s.strategy, err)
			}
			subject = name
			if s.strategy == TopicRecordName {
				subject = k.topic + "-" + name
			}
		}
		if !k.reg.RegisteredUnder(subject, id) {
			return unknownID{fmt.Sprintf("the %s's schema id %d is not registered under subject %s (%s)", s.what, id, subject, s.strategy)}
		}
		s.lastID, s.lastIdx, s.lastCP = id, append(s.lastIdx[:0], idx...), cp
	}
	if s.decode {
		if err := cp.decode(md, data); err != nil {
			return fmt.Errorf("the %s %v", s.what, err)
		}
	}
	return nil
}

// compiled is the compiled form of id's schema, made once per schema; nil
// when id is not registered.
func (k *check) compiled(id int) *compiled {
	info, ok := k.reg.SchemaByID(id)
	if !ok {
		return nil
	}
	if v, ok := k.c.schemas.Load(id); ok && v.(*compiled).info == info {
		return v.(*compiled)
	}
	cp := compile(info)
	k.c.schemas.Store(id, cp)
	return cp
}
