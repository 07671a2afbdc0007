package registry

import (
	"context"
	"encoding/binary"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestBrokerValidation: a topic with sluice.value.schema.validation takes
// records carrying a schema id registered under <topic>-value and refuses
// others with INVALID_RECORD naming the record and why; a topic without it
// takes anything.
func TestBrokerValidation(t *testing.T) {
	b := testbroker.Start(t)
	testbroker.CreateTopic(t, b.Addr(), "orders", 1, map[string]string{"sluice.value.schema.validation": "true"})
	testbroker.CreateTopic(t, b.Addr(), "free", 1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	reg := srClient(t, b.RegistryAddr())
	ss, err := reg.CreateSchema(ctx, "orders-value", sr.Schema{Schema: userV1})
	if err != nil {
		t.Fatal(err)
	}
	other, err := reg.CreateSchema(ctx, "elsewhere-value", sr.Schema{Schema: userV2})
	if err != nil {
		t.Fatal(err)
	}
	// Encode as Confluent's serializers do: magic byte 0, the id, Avro.
	var serde sr.Serde
	serde.Register(ss.ID, map[string]any{}, sr.EncodeFn(func(v any) ([]byte, error) {
		return avro.Marshal(avro.MustParse(userV1), v)
	}))
	valid, err := serde.Encode(map[string]any{"id": int64(7)})
	if err != nil {
		t.Fatal(err)
	}
	wrongID := append([]byte{0}, binary.BigEndian.AppendUint32(nil, uint32(other.ID))...)
	wrongID = append(wrongID, valid[5:]...)
	cl := b.Client(t, kgo.RecordRetries(1))
	produce := func(topic string, value []byte) error {
		return cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: value}).FirstErr()
	}
	if err := produce("orders", valid); err != nil {
		t.Fatalf("a registered schema id was refused: %v", err)
	}
	if err := produce("orders", nil); err != nil {
		t.Fatalf("a tombstone was refused: %v", err)
	}
	for name, value := range map[string][]byte{"plain text": []byte("hello"), "an id registered elsewhere": wrongID, "an unknown id": {0, 0, 0, 3, 232, 1}} {
		err := produce("orders", value)
		var ke *kerr.Error
		if !errors.As(err, &ke) || ke.Code != kerr.InvalidRecord.Code {
			t.Fatalf("%s: %v, want INVALID_RECORD", name, err)
		}
	}
	// The message names the record and the subject (franz-go carries it
	// in the produce error as ErrorMessage).
	err = produce("orders", wrongID)
	if !strings.Contains(err.Error(), "INVALID_RECORD") {
		t.Fatalf("refusal: %v", err)
	}
	if err := produce("free", []byte("hello")); err != nil {
		t.Fatalf("a topic without validation refused a record: %v", err)
	}
	// Only the valid record and the tombstone are in the topic.
	recs := testbroker.ReadAll(t, b.Addr(), "orders")
	if n := len(recs[0]); n != 2 {
		t.Fatalf("orders holds %d records, want 2", n)
	}
}

// BenchmarkBrokerValidation: produce throughput into a topic that checks
// schema ids against one that does not, same broker, 100-byte values in
// the wire format, async with franz-go defaults (linger 5 ms), without
// compression and with franz-go's default snappy (the check then
// decompresses each batch once more: the log's validation does too).
// In process: the broker's CPU is not told apart from the client's; see
// scripts/bench-schemacheck.sh for that.
//
//	go test -run XXX -bench BenchmarkBrokerValidation -benchtime 500000x ./test/registry/
func BenchmarkBrokerValidation(b *testing.B) {
	br := testbroker.Start(b)
	testbroker.CreateTopic(b, br.Addr(), "checked", 8, map[string]string{"sluice.value.schema.validation": "true"})
	testbroker.CreateTopic(b, br.Addr(), "plain", 8, nil)
	ctx := context.Background()
	ss, err := srClient(b, br.RegistryAddr()).CreateSchema(ctx, "checked-value", sr.Schema{Schema: userV1})
	if err != nil {
		b.Fatal(err)
	}
	value := append([]byte{0}, binary.BigEndian.AppendUint32(nil, uint32(ss.ID))...)
	value = append(value, make([]byte, 95)...)
	for _, codec := range []struct {
		name string
		c    kgo.CompressionCodec
	}{{"none", kgo.NoCompression()}, {"snappy", kgo.SnappyCompression()}} {
		cl := br.Client(b, kgo.ProducerLinger(5*time.Millisecond), kgo.ProducerBatchCompression(codec.c))
		for _, topic := range []string{"plain", "checked", "plain", "checked"} {
			b.Run(codec.name+"/"+topic, func(b *testing.B) {
				errs := make(chan error, 1)
				for range b.N {
					cl.Produce(ctx, &kgo.Record{Topic: topic, Value: value}, func(_ *kgo.Record, err error) {
						if err != nil {
							select {
							case errs <- err:
							default:
							}
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					b.Fatal(err)
				}
				select {
				case err := <-errs:
					b.Fatal(err)
				default:
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}
