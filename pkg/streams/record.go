package streams

import (
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is one typed record flowing through a topology.
type Record[K, V any] struct {
	Key       K
	Value     V
	Timestamp time.Time
	Headers   []kgo.RecordHeader
}

// KeyValue is a key and a value, as FlatMap returns them.
type KeyValue[K, V any] struct {
	Key   K
	Value V
}

// Context is what a processor knows about the record being processed: where
// it came from and which task runs it.
type Context struct {
	Topic     string
	Partition int32
	Offset    int64
	task      *task
}

// processor handles one record of a node and passes results on.
type processor[K, V any] func(*Context, Record[K, V]) error

// node is a point in the topology that records of one type pass through;
// operators add children to it.
type node[K, V any] struct {
	children []processor[K, V]
}

func (n *node[K, V]) forward(c *Context, r Record[K, V]) error {
	for _, ch := range n.children {
		if err := ch(c, r); err != nil {
			return err
		}
	}
	return nil
}
