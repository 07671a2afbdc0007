package compat

import (
	"context"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func saramaCodec(name string) sarama.CompressionCodec {
	switch name {
	case "gzip":
		return sarama.CompressionGZIP
	case "snappy":
		return sarama.CompressionSnappy
	case "lz4":
		return sarama.CompressionLZ4
	case "zstd":
		return sarama.CompressionZSTD
	}
	return sarama.CompressionNone
}

// TestSaramaRoundTrip produces the sample set through sarama's sync producer
// with each codec, reads it back with franz-go and with sarama's partition
// consumer, at sarama's default protocol version and at the oldest and a
// recent one.
func TestSaramaRoundTrip(t *testing.T) {
	b := startBroker(t)
	versions := []struct {
		name string
		v    sarama.KafkaVersion
	}{
		{"default", sarama.DefaultVersion},
		{"0.11", sarama.V0_11_0_0}, // the first with headers and v2 batches
		{"3.6", sarama.V3_6_0_0},
	}
	for _, ver := range versions {
		for _, codec := range codecs {
			if codec == "zstd" && !ver.v.IsAtLeast(sarama.V2_1_0_0) {
				continue // zstd needs Kafka 2.1
			}
			t.Run(ver.name+"/"+codec, func(t *testing.T) {
				topic := topicName(t)
				testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
				want := sampleRecords(50, allShapes)
				saramaProduce(t, b.Addr(), topic, ver.v, codec, want)
				t.Run("stored-as-"+codec, func(t *testing.T) { checkStoredCodec(t, b.Addr(), topic, codec) })
				checkSame(t, "franz-go reading sarama's", want, readKgo(t, b.Addr(), topic, 0, len(want)))
				checkSame(t, "sarama reading sarama's", want, saramaConsume(t, b.Addr(), topic, ver.v, len(want)))
			})
		}
	}
}

func saramaConfig(v sarama.KafkaVersion) *sarama.Config {
	cfg := sarama.NewConfig()
	cfg.Version = v
	cfg.ClientID = "sluice-compat"
	cfg.Metadata.AllowAutoTopicCreation = false
	cfg.Net.DialTimeout = 10 * time.Second
	return cfg
}

func saramaProduce(t testing.TB, addr, topic string, v sarama.KafkaVersion, codec string, recs []rec) {
	t.Helper()
	cfg := saramaConfig(v)
	cfg.Producer.Return.Successes = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Compression = saramaCodec(codec)
	cfg.Producer.Partitioner = sarama.NewManualPartitioner
	cfg.Producer.Flush.Messages = 10
	cfg.Net.MaxOpenRequests = 1
	p, err := sarama.NewSyncProducer([]string{addr}, cfg)
	if err != nil {
		t.Fatalf("sarama producer: %v", err)
	}
	defer p.Close()
	msgs := make([]*sarama.ProducerMessage, len(recs))
	for i, r := range recs {
		m := &sarama.ProducerMessage{Topic: topic, Partition: r.Partition, Timestamp: r.Timestamp}
		if r.Key != nil {
			m.Key = sarama.ByteEncoder(r.Key)
		}
		if r.Value != nil {
			m.Value = sarama.ByteEncoder(r.Value)
		}
		for _, h := range r.Headers {
			m.Headers = append(m.Headers, sarama.RecordHeader{Key: []byte(h.Key), Value: []byte(h.Value)})
		}
		msgs[i] = m
	}
	if err := p.SendMessages(msgs); err != nil {
		t.Fatalf("sarama SendMessages (%s, version %s): %v", codec, v, err)
	}
	for i, m := range msgs {
		if m.Offset != int64(i) {
			t.Fatalf("sarama: message %d acknowledged at offset %d", i, m.Offset)
		}
	}
}

func saramaConsume(t testing.TB, addr, topic string, v sarama.KafkaVersion, n int) []rec {
	t.Helper()
	c, err := sarama.NewConsumer([]string{addr}, saramaConfig(v))
	if err != nil {
		t.Fatalf("sarama consumer: %v", err)
	}
	defer c.Close()
	pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
	if err != nil {
		t.Fatalf("sarama ConsumePartition: %v", err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []rec
	for len(out) < n {
		select {
		case m := <-pc.Messages():
			r := rec{Key: m.Key, Value: m.Value, Partition: m.Partition, Offset: m.Offset, Timestamp: m.Timestamp}
			for _, h := range m.Headers {
				r.Headers = append(r.Headers, hdr{string(h.Key), string(h.Value)})
			}
			out = append(out, r)
		case err := <-pc.Errors():
			t.Fatalf("sarama consume: %v", err)
		case <-ctx.Done():
			t.Fatalf("sarama consume: %d of %d records after a minute", len(out), n)
		}
	}
	return out
}
