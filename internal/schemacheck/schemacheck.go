// Package schemacheck is the broker-side schema validation of issue 21:
// a topic with sluice.value.schema.validation=true (or
// sluice.key.schema.validation=true) takes only records whose value (key)
// is in the Confluent wire format (magic byte 0, then a 4-byte schema id)
// with an id registered in the broker's schema registry under the topic's
// subject (TopicNameStrategy: "<topic>-value", "<topic>-key"). A batch with
// any other record is refused whole with INVALID_RECORD and a message
// naming the record and why (docs/schema-registry.md). Null values
// (tombstones) and null keys pass.
package schemacheck

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// The topic configs that turn validation on.
const (
	ValueConfig = "sluice.value.schema.validation"
	KeyConfig   = "sluice.key.schema.validation"
)

// Registry answers whether an id is registered under a subject
// (registry.Registry, lock-free).
type Registry interface {
	RegisteredUnder(subject string, id int) bool
}

// Topics gives a topic's config overrides.
type Topics interface {
	Topic(name string) (log.TopicInfo, bool)
}

// ErrInvalid is a record that does not carry a schema registered for the
// topic.
var ErrInvalid = errors.New("schema validation")

// Checker validates produced batches. Its registry is set once the
// registry runs (SetRegistry); until then, and when the broker runs
// without a registry, a validating topic refuses every record.
type Checker struct {
	topics Topics
	reg    atomic.Pointer[Registry]
}

// New returns a checker reading topic configs from topics.
func New(topics Topics) *Checker { return &Checker{topics: topics} }

// SetRegistry sets the registry ids are checked against.
func (c *Checker) SetRegistry(r Registry) { c.reg.Store(&r) }

// Check validates records (whole batches) produced to topic's partition p;
// nil when the topic does not validate.
func (c *Checker) Check(ctx context.Context, topic string, p *log.Partition, records []byte) error {
	t, ok := c.topics.Topic(topic)
	if !ok {
		return nil
	}
	value, key := t.Configs[ValueConfig] == "true", t.Configs[KeyConfig] == "true"
	if !value && !key {
		return nil
	}
	rp := c.reg.Load()
	if rp == nil {
		return fmt.Errorf("%w: topic %s validates schemas but this broker runs no schema registry (schema_registry.listen)", ErrInvalid, topic)
	}
	reg := *rp
	n := 0
	for b := records; len(b) >= batch.HeaderSize; {
		size, err := batch.Size(b)
		if err != nil || size > len(b) {
			return nil // the log's own validation answers for a malformed batch
		}
		bt := b[:size]
		b = b[size:]
		if batch.Attributes(bt)&batch.AttrControl != 0 {
			continue
		}
		x, err := p.DecodeRecords(ctx, bt)
		if err != nil {
			return nil // likewise: the append refuses it with its own error
		}
		for i := range x.Records {
			r := &x.Records[i]
			if value && r.Value != nil {
				if err := check(reg, topic+"-value", "value", r.Value); err != nil {
					x.Release()
					return fmt.Errorf("%w: record %d of the batch: %v", ErrInvalid, n, err)
				}
			}
			if key && r.Key != nil {
				if err := check(reg, topic+"-key", "key", r.Key); err != nil {
					x.Release()
					return fmt.Errorf("%w: record %d of the batch: %v", ErrInvalid, n, err)
				}
			}
			n++
		}
		x.Release()
	}
	return nil
}

func check(reg Registry, subject, what string, b []byte) error {
	if len(b) < 5 || b[0] != 0 {
		return fmt.Errorf("the %s is not in the schema registry's wire format (magic byte 0 and a 4-byte schema id)", what)
	}
	id := int(binary.BigEndian.Uint32(b[1:5]))
	if !reg.RegisteredUnder(subject, id) {
		return fmt.Errorf("the %s's schema id %d is not registered under subject %s", what, id, subject)
	}
	return nil
}
