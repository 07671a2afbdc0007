package compat

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// pyClient is one Python Kafka client driven through a script in testdata.
type pyClient struct {
	name   string // test name
	module string // module the Debian package provides
	pkg    string // Debian package
	script string // in testdata/
}

var pyClients = []pyClient{
	{"confluent-kafka", "confluent_kafka", "python3-confluent-kafka", "confluent_kafka_client.py"},
	{"kafka-python", "kafka", "python3-kafka", "kafka_python_client.py"},
}

type pyRecord struct {
	Partition *int32      `json:"partition,omitempty"`
	Offset    int64       `json:"offset,omitempty"`
	Timestamp int64       `json:"timestamp,omitempty"`
	Key       *string     `json:"key"`
	Value     *string     `json:"value"`
	Headers   [][]*string `json:"headers"`
	Error     string      `json:"error,omitempty"`
}

func b64(b []byte) *string {
	if b == nil {
		return nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return &s
}

func unb64(t testing.TB, s *string) []byte {
	if s == nil {
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if err != nil {
		t.Fatalf("bad base64 from the script: %v", err)
	}
	return b
}

func (c pyClient) run(t testing.TB, stdin []byte, args ...string) []byte {
	t.Helper()
	return run(t, stdin, 3*time.Minute, python, append([]string{filepath.Join("testdata", c.script)}, args...)...)
}

func (c pyClient) produce(t testing.TB, addr, topic, codec string, recs []rec) {
	t.Helper()
	in := make([]pyRecord, len(recs))
	for i, r := range recs {
		p := r.Partition
		in[i] = pyRecord{Partition: &p, Key: b64(r.Key), Value: b64(r.Value)}
		for _, h := range r.Headers {
			in[i].Headers = append(in[i].Headers, []*string{&h.Key, b64([]byte(h.Value))})
		}
	}
	js, _ := json.Marshal(in)
	var reports []pyRecord
	out := c.run(t, js, "produce", addr, topic, codec)
	if err := json.Unmarshal(out, &reports); err != nil {
		t.Fatalf("%s produce output %q: %v", c.name, out, err)
	}
	if len(reports) != len(recs) {
		t.Fatalf("%s: %d delivery reports for %d records", c.name, len(reports), len(recs))
	}
	for i, r := range reports {
		if r.Error != "" {
			t.Fatalf("%s: record %d not delivered: %s", c.name, i, r.Error)
		}
		if r.Offset != int64(i) {
			t.Fatalf("%s: record %d delivered at offset %d", c.name, i, r.Offset)
		}
	}
}

func (c pyClient) consume(t testing.TB, addr, topic string, n int) []rec {
	t.Helper()
	var got []pyRecord
	out := c.run(t, nil, "consume", addr, topic, "0", fmt.Sprint(n))
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s consume output %q: %v", c.name, out, err)
	}
	recs := make([]rec, len(got))
	for i, g := range got {
		recs[i] = rec{Key: unb64(t, g.Key), Value: unb64(t, g.Value), Offset: g.Offset, Timestamp: time.UnixMilli(g.Timestamp)}
		for _, h := range g.Headers {
			recs[i].Headers = append(recs[i].Headers, hdr{*h[0], string(unb64(t, h[1]))})
		}
	}
	return recs
}

// TestPythonRoundTrip produces the sample set with each Python client and
// codec, reads it back with franz-go and with the same client, and reads a
// franz-go-produced set with the Python client.
func TestPythonRoundTrip(t *testing.T) {
	b := startBroker(t)
	for _, c := range pyClients {
		t.Run(c.name, func(t *testing.T) {
			needPythonModule(t, c.module, c.pkg)
			for _, codec := range codecs {
				t.Run(codec, func(t *testing.T) {
					topic := topicName(t)
					testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
					want := sampleRecords(40, allShapes)
					c.produce(t, b.Addr(), topic, codec, want)
					checkSame(t, "franz-go reading "+c.name+"'s", want, readKgo(t, b.Addr(), topic, 0, len(want)))
					checkSame(t, c.name+" reading its own", want, c.consume(t, b.Addr(), topic, len(want)))
					t.Run("stored-as-"+codec, func(t *testing.T) {
						checkStoredCodec(t, b.Addr(), topic, codec)
					})
				})
			}
			t.Run("reads franz-go zstd", func(t *testing.T) {
				topic := topicName(t)
				testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
				want := sampleRecords(40, allShapes)
				produceKgo(t, b.Addr(), topic, want, kgoZstd())
				checkSame(t, c.name+" reading franz-go's", want, c.consume(t, b.Addr(), topic, len(want)))
			})
			t.Run("offsets for times", func(t *testing.T) {
				topic := topicName(t)
				testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
				base := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
				var recs []rec
				for i := 0; i < 10; i++ {
					recs = append(recs, rec{Value: []byte{byte(i)}, Timestamp: base.Add(time.Duration(i) * time.Second)})
				}
				produceKgo(t, b.Addr(), topic, recs[:5])
				produceKgo(t, b.Addr(), topic, recs[5:])
				var got struct{ Offset int64 }
				out := c.run(t, nil, "offsets-for-time", b.Addr(), topic, "0", fmt.Sprint(base.Add(6500*time.Millisecond).UnixMilli()))
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("output %q: %v", out, err)
				}
				if got.Offset != 7 {
					t.Errorf("%s offsets_for_times at record 6.5's time: offset %d, want 7", c.name, got.Offset)
				}
			})
			t.Run("metadata", func(t *testing.T) {
				topic := topicName(t)
				testbroker.CreateTopic(t, b.Addr(), topic, 5, nil)
				var got map[string]int
				out := c.run(t, nil, "metadata", b.Addr())
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatalf("output %q: %v", out, err)
				}
				if got[topic] != 5 {
					t.Errorf("%s sees %s with %d partitions, want 5 (all: %v)", c.name, topic, got[topic], got)
				}
			})
		})
	}
}
