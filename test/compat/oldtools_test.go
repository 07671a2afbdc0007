package compat

import (
	"testing"

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
	kcat := needTool(t, "kcat")
	for _, c := range pyClients {
		needPythonModule(t, c.module, c.pkg)
	}
	b := startBroker(t)
	for _, codec := range []string{"none", "gzip", "snappy", "lz4"} {
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
