package compat

import (
	"context"
	"io"
	"testing"
	"time"

	kafka "github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/compress"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func kafkagoCodec(name string) kafka.Compression {
	switch name {
	case "gzip":
		return compress.Gzip
	case "snappy":
		return compress.Snappy
	case "lz4":
		return compress.Lz4
	case "zstd":
		return compress.Zstd
	}
	return compress.None
}

// TestKafkaGoRoundTrip produces the sample set with segmentio/kafka-go's
// Writer for each codec and reads it back with franz-go and kafka-go's
// Reader.
func TestKafkaGoRoundTrip(t *testing.T) {
	b := startBroker(t)
	for _, codec := range codecs {
		t.Run(codec, func(t *testing.T) {
			topic := topicName(t)
			testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
			want := sampleRecords(50, allShapes)
			w := &kafka.Writer{
				Addr: kafka.TCP(b.Addr()),
				// A transport of its own: the shared default one caches
				// metadata and would not yet know this test's new topic.
				Transport:              &kafka.Transport{},
				Topic:                  topic,
				Compression:            kafkagoCodec(codec),
				RequiredAcks:           kafka.RequireAll,
				BatchTimeout:           10 * time.Millisecond,
				BatchSize:              20,
				MaxAttempts:            3,
				AllowAutoTopicCreation: false,
			}
			msgs := make([]kafka.Message, len(want))
			for i, r := range want {
				msgs[i] = kafka.Message{Key: r.Key, Value: r.Value}
				for _, h := range r.Headers {
					msgs[i].Headers = append(msgs[i].Headers, kafka.Header{Key: h.Key, Value: []byte(h.Value)})
				}
			}
			ctx := ctxFor(t, time.Minute)
			if err := w.WriteMessages(ctx, msgs...); err != nil {
				t.Fatalf("kafka-go WriteMessages (%s): %v", codec, err)
			}
			if err := w.Close(); err != nil {
				t.Fatalf("kafka-go Writer.Close: %v", err)
			}
			t.Run("stored-as-"+codec, func(t *testing.T) { checkStoredCodec(t, b.Addr(), topic, codec) })
			checkSame(t, "franz-go reading kafka-go's", want, readKgo(t, b.Addr(), topic, 0, len(want)))
			// kafka-go's Reader returns an empty value as nil (a client
			// limitation: franz-go above sees the empty values the broker
			// stored), so compare with empty values as null.
			checkSame(t, "kafka-go reading kafka-go's", emptyAsNull(want), kafkagoConsume(t, b.Addr(), topic, len(want)))
		})
	}
}

func kafkagoConsume(t testing.TB, addr, topic string, n int) []rec {
	t.Helper()
	r := kafka.NewReader(kafka.ReaderConfig{
		Brokers:   []string{addr},
		Topic:     topic,
		Partition: 0,
		MinBytes:  1,
		MaxBytes:  10 << 20,
		MaxWait:   500 * time.Millisecond,
	})
	defer r.Close()
	if err := r.SetOffset(kafka.FirstOffset); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []rec
	for len(out) < n {
		m, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("kafka-go ReadMessage after %d of %d records: %v", len(out), n, err)
		}
		rc := rec{Key: m.Key, Value: m.Value, Partition: int32(m.Partition), Offset: m.Offset, Timestamp: m.Time}
		for _, h := range m.Headers {
			rc.Headers = append(rc.Headers, hdr{h.Key, string(h.Value)})
		}
		out = append(out, rc)
	}
	return out
}

// TestKafkaGoClientFetch uses kafka-go's low-level Client, whose Fetch
// names session id -1 with epoch -1: a full, sessionless fetch that Kafka
// serves whatever session id it names.
func TestKafkaGoClientFetch(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	want := sampleRecords(10, sampleOpts{headers: true})
	produceKgo(t, b.Addr(), topic, want)

	cl := &kafka.Client{Addr: kafka.TCP(b.Addr()), Transport: &kafka.Transport{}}
	ctx := ctxFor(t, 30*time.Second)
	res, err := cl.Fetch(ctx, &kafka.FetchRequest{
		Topic: topic, Partition: 0, Offset: 0,
		MinBytes: 1, MaxBytes: 1 << 20, MaxWait: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("kafka-go Client.Fetch: %v", err)
	}
	if res.Error != nil {
		t.Fatalf("kafka-go Client.Fetch: partition error %v", res.Error)
	}
	if res.HighWatermark != int64(len(want)) {
		t.Errorf("high watermark %d, want %d", res.HighWatermark, len(want))
	}
	var got []rec
	for {
		r, err := res.Records.ReadRecord()
		if err != nil {
			break
		}
		var g rec
		g.Key, _ = readAllBytes(r.Key)
		g.Value, _ = readAllBytes(r.Value)
		for _, h := range r.Headers {
			g.Headers = append(g.Headers, hdr{h.Key, string(h.Value)})
		}
		got = append(got, g)
	}
	checkSame(t, "kafka-go Client.Fetch", want, got)
}

func readAllBytes(b kafka.Bytes) ([]byte, error) {
	if b == nil {
		return nil, nil
	}
	defer b.Close()
	return io.ReadAll(b)
}
