package compat

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// seed returns a franz-go handle on the broker itself, for raw kmsg
// requests that bypass the client's routing and retries. The request
// version is negotiated through ApiVersions.
func seed(t testing.TB, addr string) *kgo.Broker {
	t.Helper()
	cl := testbroker.NewClient(t, addr)
	return cl.SeedBrokers()[0]
}

func request[R kmsg.Response](t testing.TB, br *kgo.Broker, req kmsg.Request) R {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := br.Request(ctx, req)
	if err != nil {
		t.Fatalf("%s request: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp.(R)
}

// wantCode fails the test unless code is the Kafka error want.
func wantCode(t testing.TB, what string, code int16, want error) {
	t.Helper()
	got := kerr.ErrorForCode(code)
	if got != want {
		t.Errorf("%s: error code %d (%v), want %d (%v)", what, code, got, errCode(want), want)
	}
}

func errCode(err error) int16 {
	if ke, ok := err.(*kerr.Error); ok {
		return ke.Code
	}
	return 0
}

// recordBatch builds a valid v2 record batch (uncompressed, no producer id)
// holding values, with a correct CRC-32C.
func recordBatch(values ...[]byte) []byte {
	now := time.Now().UnixMilli()
	var recs []byte
	for i, v := range values {
		r := kmsg.Record{OffsetDelta: int32(i), Value: v}
		enc := r.AppendTo(nil)
		r.Length = int32(len(enc) - 1) // Length was encoded as the 1-byte varint 0
		recs = r.AppendTo(recs)
	}
	b := kmsg.RecordBatch{
		Magic:           2,
		LastOffsetDelta: int32(len(values) - 1),
		FirstTimestamp:  now,
		MaxTimestamp:    now,
		ProducerID:      -1,
		ProducerEpoch:   -1,
		FirstSequence:   -1,
		NumRecords:      int32(len(values)),
		Records:         recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:12], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:21], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func produceRaw(t testing.TB, br *kgo.Broker, topic string, partition int32, batch []byte) kmsg.ProduceResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = partition
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ProduceResponse](t, br, req)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("produce response has %d topics, want 1 with 1 partition: %+v", len(resp.Topics), resp.Topics)
	}
	return resp.Topics[0].Partitions[0]
}

func topicID(t testing.TB, br *kgo.Broker, topic string) [16]byte {
	t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, mt)
	resp := request[*kmsg.MetadataResponse](t, br, req)
	if len(resp.Topics) != 1 {
		t.Fatalf("metadata for %s: %d topics", topic, len(resp.Topics))
	}
	if resp.Topics[0].ErrorCode != 0 {
		t.Fatalf("metadata for %s: %v", topic, kerr.ErrorForCode(resp.Topics[0].ErrorCode))
	}
	return resp.Topics[0].TopicID
}

func fetchRaw(t testing.TB, br *kgo.Broker, topic string, id [16]byte, partition int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = topic
	ft.TopicID = id
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = partition
	fp.FetchOffset = offset
	fp.PartitionMaxBytes = 1 << 20
	fp.CurrentLeaderEpoch = -1
	fp.LastFetchedEpoch = -1
	ft.Partitions = append(ft.Partitions, fp)
	req.Topics = append(req.Topics, ft)
	resp := request[*kmsg.FetchResponse](t, br, req)
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch: top-level error %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response has %d topics, want 1 with 1 partition", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// librdkafkaNote explains the usual cause when a librdkafka client (kcat,
// confluent-kafka) sends a batch uncompressed: librdkafka up to 2.11 checks,
// before compressing with gzip, snappy or lz4, that the broker speaks
// Produce at version 0 (its ApiVersions range must include 0), and for lz4
// also that it has FindCoordinator; when the check fails it silently sends
// the batch uncompressed. zstd is gated on Produce v7 / Fetch v10 instead.
const librdkafkaNote = "\n(if the producer is librdkafka <= 2.11, e.g. Debian's kcat or confluent-kafka: it compresses with gzip/snappy/lz4 " +
	"only when ApiVersions advertises Produce with min version 0, and lz4 also needs FindCoordinator; " +
	"otherwise it logs \"Broker does not support compression type\" and sends uncompressed)"

var codecIDs = map[string]int16{"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}

// checkStoredCodec fetches partition 0 of topic raw and checks that the
// broker kept the client's batches as sent: at least one batch carries the
// codec's id in its attributes, and none carries another codec.
func checkStoredCodec(t testing.TB, addr, topic, codec string) {
	t.Helper()
	br := seed(t, addr)
	id := topicID(t, br, topic)
	seen := map[int16]int{}
	next := int64(0)
	for i := 0; i < 1000; i++ {
		p := fetchRaw(t, br, topic, id, 0, next)
		if p.ErrorCode != 0 {
			t.Fatalf("raw fetch at %d: %v", next, kerr.ErrorForCode(p.ErrorCode))
		}
		raw := p.RecordBatches
		if len(raw) == 0 {
			break
		}
		for len(raw) >= 61 {
			size := int(binary.BigEndian.Uint32(raw[8:12])) + 12
			if size > len(raw) {
				break // a partial batch at the end of the response
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(raw[:size]); err != nil {
				t.Fatalf("decoding a fetched batch: %v", err)
			}
			seen[rb.Attributes&0x07]++
			next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			raw = raw[size:]
		}
		if next >= p.HighWatermark {
			break
		}
	}
	want := codecIDs[codec]
	if seen[want] == 0 {
		t.Errorf("no stored batch uses %s (codec %d); batches per codec id: %v%s", codec, want, seen, librdkafkaNote)
	}
	for c, n := range seen {
		if c != want && c != 0 {
			t.Errorf("%d stored batches use codec %d, want %s (%d)", n, c, codec, want)
		}
	}
}
