package txn

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// partitionFor is Kafka's mapping of an id to a partition of the internal
// topic (see log.CoordinatorPartition).
func partitionFor(id string, n int32) int32 { return log.CoordinatorPartition(id, n) }

func txnKey(id string) []byte {
	k := kmsg.TxnMetadataKey{Version: 0, TransactionalID: id}
	return k.AppendTo(nil)
}

// txnValue encodes t as TxnMetadataValue v0, as Kafka 3.x/4.0 write it
// without transaction version 2.
func txnValue(t *snapshot) []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = 0
	v.ProducerID = t.pid
	v.ProducerEpoch = t.epoch
	v.TimeoutMillis = int32(t.timeout / time.Millisecond)
	v.State = kmsg.TransactionState(t.state)
	v.LastUpdateTimestamp = t.updated.UnixMilli()
	v.StartTimestamp = -1
	if !t.started.IsZero() {
		v.StartTimestamp = t.started.UnixMilli()
	}
	for _, tp := range sortedTopics(t.parts) {
		v.Topics = append(v.Topics, tp)
	}
	return v.AppendTo(nil)
}

func sortedTopics(parts map[TopicPartition]struct{}) []kmsg.TxnMetadataValueTopic {
	byTopic := map[string][]int32{}
	for tp := range parts {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	names := make([]string, 0, len(byTopic))
	for n := range byTopic {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]kmsg.TxnMetadataValueTopic, 0, len(names))
	for _, n := range names {
		ps := byTopic[n]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		out = append(out, kmsg.TxnMetadataValueTopic{Topic: n, Partitions: ps})
	}
	return out
}

// decodeRecord reads one record of the state topic. ok is false for keys
// that are not transaction metadata (skipped, as Kafka skips them); v is
// nil for a tombstone.
func decodeRecord(key, value []byte) (id string, v *kmsg.TxnMetadataValue, ok bool, err error) {
	if len(key) < 2 {
		return "", nil, false, fmt.Errorf("key of %d bytes", len(key))
	}
	if ver := int16(binary.BigEndian.Uint16(key)); ver != 0 {
		return "", nil, false, nil
	}
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", nil, false, fmt.Errorf("txn metadata key: %w", err)
	}
	if value == nil {
		return k.TransactionalID, nil, true, nil
	}
	val := kmsg.NewTxnMetadataValue()
	if err := val.ReadFrom(value); err != nil {
		return "", nil, false, fmt.Errorf("txn metadata value of %q: %w", k.TransactionalID, err)
	}
	return k.TransactionalID, &val, true, nil
}

func buildBatch(now time.Time, recs []kmsg.Record) ([]byte, error) {
	return batch.Build(0, now.UnixMilli(), recs)
}
