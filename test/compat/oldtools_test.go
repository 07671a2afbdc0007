package compat

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestOldFetchLibrdkafkaPython: librdkafka (kcat, confluent-kafka) pinned
// to Kafka 0.8.2 and 0.9.0 (Fetch v0/v1, message format 0, ListOffsets v0,
// Metadata v0) and kafka-python pinned to those and to 0.10.0 (Fetch v2,
// format 1) read every record of batches written with each codec
// the old formats carry: three more independent decoders of the
// down-converted sets.
func TestOldFetchLibrdkafkaPython(t *testing.T) {
	kcat := needKcatAndPython(t)
	b := startBroker(t)
	for _, codec := range legacyCodecs {
		topic := topicName(t) + "-" + codec
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		// Shapes every client tells apart: kcat reads empty as null.
		want := produceKgo(t, b.Addr(), topic, sampleRecords(40, sampleOpts{nullKeys: true, nullValues: true}),
			kgo.ProducerBatchCompression(kgoCodec(codec)))
		for i := range want {
			want[i].Headers = nil // the legacy formats carry none
		}
		for _, old := range []string{"0.8.2", "0.9.0", "0.10.0"} {
			t.Run(codec+"/"+old, func(t *testing.T) {
				// librdkafka asks for ApiVersions (and then negotiates up)
				// from 0.10 on, whatever api.version.request says: it is
				// pinned below that only.
				rdkafka := old != "0.10.0"
				if rdkafka {
					checkSame(t, "kcat at "+old, want, kcatConsume(t, kcat, b.Addr(), topic, "beginning", len(want),
						"-X", "api.version.request=false", "-X", "broker.version.fallback="+old))
				}
				t.Setenv("SLUICE_TEST_OLD_VERSION", old)
				for _, c := range pyClients {
					if c.module == "confluent_kafka" && !rdkafka {
						continue
					}
					got := c.consume(t, b.Addr(), topic, len(want))
					checkSame(t, c.name+" at "+old, want, got)
					for i := range got {
						if got[i].Offset != int64(i) {
							t.Fatalf("%s at %s: record %d at offset %d", c.name, old, i, got[i].Offset)
						}
					}
				}
			})
		}
	}
}

// TestOldProduceLibrdkafkaPython: kcat and confluent-kafka (librdkafka)
// pinned to 0.8.2 and 0.9.0, and kafka-python pinned to those and 0.10.0,
// produce message sets of format 0 (1 for kafka-python at 0.10.0) with
// each codec, lz4 in format 0 with the header checksum old Kafka wrote;
// franz-go reads the up-converted records back as produced.
func TestOldProduceLibrdkafkaPython(t *testing.T) {
	kcat := needKcatAndPython(t)
	b := startBroker(t)
	for _, codec := range legacyCodecs {
		for _, old := range []string{"0.8.2", "0.9.0", "0.10.0"} {
			t.Run(codec+"/"+old, func(t *testing.T) {
				rdkafka := old != "0.10.0" // see TestOldFetchLibrdkafkaPython
				// Shapes every client tells apart: kcat sends empty as null.
				want := sampleRecords(30, sampleOpts{nullKeys: true, nullValues: true})
				if rdkafka {
					topic := topicName(t)
					testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
					var in bytes.Buffer
					for _, r := range want {
						fmt.Fprintf(&in, "%s::%s\n", r.Key, r.Value)
					}
					run(t, in.Bytes(), 2*time.Minute, kcat, "-P", "-b", b.Addr(), "-t", topic, "-p", "0", "-K", "::", "-Z",
						"-z", codec, "-X", "acks=all", "-X", "linger.ms=20", "-X", "api.version.request=false",
						"-X", "broker.version.fallback="+old)
					checkSame(t, "franz-go reading kcat at "+old, want, readKgo(t, b.Addr(), topic, 0, len(want)))
				}
				t.Setenv("SLUICE_TEST_OLD_VERSION", old)
				for _, c := range pyClients {
					if c.module == "confluent_kafka" && !rdkafka {
						continue
					}
					topic := topicName(t)
					testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
					c.produce(t, b.Addr(), topic, codec, want)
					checkSame(t, "franz-go reading "+c.name+" at "+old, want, readKgo(t, b.Addr(), topic, 0, len(want)))
				}
			})
		}
	}
}

// needKcatAndPython returns kcat's path once kcat and both Python clients
// are known to be there.
func needKcatAndPython(t testing.TB) string {
	t.Helper()
	kcat := needTool(t, "kcat")
	for _, c := range pyClients {
		needPythonModule(t, c.module, c.pkg)
	}
	return kcat
}
