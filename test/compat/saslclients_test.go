package compat

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

var saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}

// TestSASLPythonClients: confluent-kafka (librdkafka) and kafka-python
// produce and consume through the SASL_PLAINTEXT listener with every
// mechanism, as the bootstrap user.
func TestSASLPythonClients(t *testing.T) {
	b, saslAddr := startSASLBroker(t)
	for _, c := range pyClients {
		t.Run(c.name, func(t *testing.T) {
			needPythonModule(t, c.module, c.pkg)
			for _, mech := range saslMechanisms {
				t.Run(mech, func(t *testing.T) {
					t.Setenv("SLUICE_TEST_SASL", mech+":admin:admin-secret")
					topic := topicName(t)
					testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
					want := sampleRecords(10, allShapes)
					c.produce(t, saslAddr, topic, "none", want)
					checkSame(t, c.name+" over SASL reading its own", want, c.consume(t, saslAddr, topic, len(want)))
				})
			}
		})
	}
}

// TestSASLKcat: kcat produces and consumes through the SASL_PLAINTEXT
// listener with every mechanism; with a wrong password it gets nothing.
func TestSASLKcat(t *testing.T) {
	kcat := needTool(t, "kcat")
	b, saslAddr := startSASLBroker(t)
	for _, mech := range saslMechanisms {
		t.Run(mech, func(t *testing.T) {
			topic := topicName(t)
			testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
			auth := []string{"-X", "security.protocol=SASL_PLAINTEXT", "-X", "sasl.mechanisms=" + mech,
				"-X", "sasl.username=admin", "-X", "sasl.password=admin-secret"}
			want := kcatRecords(20)
			var in bytes.Buffer
			for _, r := range want {
				fmt.Fprintf(&in, "%s::%s\n", r.Key, r.Value)
			}
			args := []string{"-P", "-b", saslAddr, "-t", topic, "-p", "0", "-K", "::", "-Z",
				"-X", "acks=all", "-X", "message.timeout.ms=60000"}
			for _, h := range kcatHeaders {
				args = append(args, "-H", h.Key+"="+h.Value)
			}
			run(t, in.Bytes(), 2*time.Minute, kcat, append(args, auth...)...)
			checkSame(t, "franz-go reading kcat's over SASL", want, readKgo(t, b.Addr(), topic, 0, len(want)))
			out := run(t, nil, 2*time.Minute, kcat, append([]string{"-C", "-b", saslAddr, "-t", topic, "-p", "0", "-o", "beginning",
				"-c", fmt.Sprint(len(want)), "-e", "-q", "-f", "%k::%s\n"}, auth...)...)
			if got := bytes.Count(out, []byte("\n")); got != len(want) {
				t.Errorf("kcat consumed %d records over SASL, want %d:\n%s", got, len(want), clip(string(out)))
			}
		})
	}
}
