package streams

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"
)

type manualPartition struct{}

// withPartition marks r to be written to r.Partition as set.
func withPartition(r *kgo.Record, p int32) {
	r.Partition = p
	r.Context = context.WithValue(context.Background(), manualPartition{}, true)
}

// partitioner writes changelog records to their task's partition and
// every other record by its key, as Kafka's default partitioner does
// (murmur2), so a repartition topic groups keys the way any Kafka client
// would.
type partitioner struct{ keyed kgo.Partitioner }

func newPartitioner() kgo.Partitioner { return partitioner{keyed: kgo.StickyKeyPartitioner(nil)} }

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return topicPartitioner{keyed: p.keyed.ForTopic(topic)}
}

type topicPartitioner struct{ keyed kgo.TopicPartitioner }

func (topicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (tp topicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context != nil && r.Context.Value(manualPartition{}) != nil {
		return int(r.Partition)
	}
	return tp.keyed.Partition(r, n)
}

// KeyPartition is the partition, of n, that the App writes a record with
// key to: Kafka's default for keyed records. Tests use it to compute where
// a repartitioned key lands.
func KeyPartition(key []byte, n int) int32 {
	tp := newPartitioner().ForTopic("")
	return int32(tp.Partition(&kgo.Record{Key: key}, n))
}
