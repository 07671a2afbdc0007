package schemacheck

import (
	"context"
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/registry"
)

// lateRegistry knows the ids of known at once, and those of pending only
// once CatchUp has run: a schema registered through another broker that
// this broker's copy of _schemas has not applied yet.
type lateRegistry struct {
	mu      sync.Mutex
	known   map[int]bool
	pending map[int]bool
	catchUp int
}

func (r *lateRegistry) RegisteredUnder(subject string, id int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return subject == "orders-value" && r.known[id]
}

func (r *lateRegistry) SchemaByID(int) (*registry.SchemaInfo, bool) { return nil, false }

func (r *lateRegistry) CatchUp(context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.catchUp++
	for id := range r.pending {
		r.known[id] = true
	}
	return nil
}

type oneTopic struct{}

func (oneTopic) Topic(name string) (log.TopicInfo, bool) {
	return log.TopicInfo{Name: name, Partitions: 1, Configs: map[string]string{ValueConfig: "true"}}, name == "orders"
}

type plainPartition struct{}

func (plainPartition) WalkRecords(_ context.Context, h *batch.Header, b []byte, fn batch.WalkFunc) error {
	return batch.WalkRecords(h, b, fn)
}

// records is one uncompressed batch of values.
func records(values ...[]byte) []byte {
	b := kmsg.RecordBatch{Magic: 2, NumRecords: int32(len(values)), LastOffsetDelta: int32(len(values) - 1)}
	var raw []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		r.Length = int32(len(r.AppendTo(nil)) - 1) // the length of the rest (a varint 0 is one byte)
		raw = r.AppendTo(raw)
	}
	b.Records = raw
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[8:12], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[batch.OffCRC:], batch.ComputeCRC(out))
	return out
}

func wire(id int) []byte { return binary.BigEndian.AppendUint32([]byte{0}, uint32(id)) }

// TestCatchUpBeforeRefusing: an id the registry learns only by catching
// up is taken; an id it never learns is refused after one catch-up; a
// known id costs no catch-up.
func TestCatchUpBeforeRefusing(t *testing.T) {
	reg := &lateRegistry{known: map[int]bool{1: true}, pending: map[int]bool{2: true}}
	c := New(oneTopic{}, Options{})
	c.SetRegistry(reg)
	ctx := context.Background()
	if err := c.checkCaughtUp(ctx, "orders", plainPartition{}, records(wire(1))); err != nil || reg.catchUp != 0 {
		t.Fatalf("known id: %v after %d catch-ups", err, reg.catchUp)
	}
	if err := c.checkCaughtUp(ctx, "orders", plainPartition{}, records(wire(1), wire(2))); err != nil || reg.catchUp != 1 {
		t.Fatalf("id registered elsewhere a moment ago: %v after %d catch-ups", err, reg.catchUp)
	}
	err := c.checkCaughtUp(ctx, "orders", plainPartition{}, records(wire(1), wire(3)))
	if !errors.Is(err, ErrInvalid) || reg.catchUp != 2 {
		t.Fatalf("unknown id: %v after %d catch-ups", err, reg.catchUp)
	}
	// Not an unknown id: refused without catching up.
	if err := c.checkCaughtUp(ctx, "orders", plainPartition{}, records([]byte("plain"))); !errors.Is(err, ErrInvalid) || reg.catchUp != 2 {
		t.Fatalf("plain bytes: %v after %d catch-ups", err, reg.catchUp)
	}
}
