package compat

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// codecs are the batch compression codecs Kafka defines.
var codecs = []string{"none", "gzip", "snappy", "lz4", "zstd"}

func kgoCodec(name string) kgo.CompressionCodec {
	switch name {
	case "gzip":
		return kgo.GzipCompression()
	case "snappy":
		return kgo.SnappyCompression()
	case "lz4":
		return kgo.Lz4Compression()
	case "zstd":
		return kgo.ZstdCompression()
	}
	return kgo.NoCompression()
}

var topicSeq atomic.Int64

var unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9._-]+`)

// topicName is a valid, unique topic name derived from the test's name.
func topicName(t testing.TB) string {
	n := unsafeChars.ReplaceAllString(t.Name(), "_")
	if len(n) > 200 {
		n = n[len(n)-200:]
	}
	return fmt.Sprintf("%s-%d", n, topicSeq.Add(1))
}

func ctxFor(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

type hdr struct{ Key, Value string }

// rec is a record in client-neutral form. Nil and empty byte slices differ:
// nil is Kafka's null.
type rec struct {
	Key, Value []byte
	Headers    []hdr
	Partition  int32
	Offset     int64
	Timestamp  time.Time
}

func (r rec) String() string {
	show := func(b []byte) string {
		if b == nil {
			return "null"
		}
		if len(b) > 40 {
			return fmt.Sprintf("%q...(%d bytes)", b[:40], len(b))
		}
		return fmt.Sprintf("%q", b)
	}
	return fmt.Sprintf("p%d@%d key=%s value=%s headers=%v", r.Partition, r.Offset, show(r.Key), show(r.Value), r.Headers)
}

// sampleOpts says which record shapes a client can express.
type sampleOpts struct {
	nullKeys    bool // can send a null key
	nullValues  bool // can send a null value
	emptyValues bool // can send an empty (non-null) value distinct from null
	headers     bool
}

var allShapes = sampleOpts{nullKeys: true, nullValues: true, emptyValues: true, headers: true}

// sampleRecords is the standard record set: compressible and incompressible
// values, large and small, null keys and values, empty values, and headers.
func sampleRecords(n int, o sampleOpts) []rec {
	out := make([]rec, n)
	for i := range out {
		r := rec{Key: []byte(fmt.Sprintf("key-%03d", i))}
		switch {
		case i%10 == 3 && o.nullKeys:
			r.Key = nil
		}
		switch {
		case i%10 == 7 && o.nullValues:
			r.Value = nil
		case i%10 == 8 && o.emptyValues:
			r.Value = []byte{}
		case i%10 == 5:
			// Large and compressible.
			r.Value = bytes.Repeat([]byte(fmt.Sprintf("sluice-%d|", i)), 800)
		case i%10 == 9:
			// Incompressible-ish.
			b := make([]byte, 2000)
			x := uint32(i*2654435761 + 1)
			for j := range b {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				b[j] = 'a' + byte(x%26)
			}
			r.Value = b
		default:
			r.Value = []byte(fmt.Sprintf("value-%d %s", i, strings.Repeat("x", i)))
		}
		if o.headers && i%2 == 0 {
			r.Headers = []hdr{{"h1", fmt.Sprintf("hv-%d", i)}, {"trace", "abc"}}
		}
		out[i] = r
	}
	return out
}

func eqBytes(a, b []byte) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return bytes.Equal(a, b)
}

// checkSame compares records read back with the records produced, in order,
// field by field, and reports every mismatch (up to a limit).
func checkSame(t testing.TB, who string, want, got []rec) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: read %d records, produced %d", who, len(got), len(want))
	}
	bad := 0
	for i := 0; i < len(want) && i < len(got); i++ {
		w, g := want[i], got[i]
		var diffs []string
		if !eqBytes(w.Key, g.Key) {
			diffs = append(diffs, "key")
		}
		if !eqBytes(w.Value, g.Value) {
			diffs = append(diffs, "value")
		}
		if len(w.Headers) != len(g.Headers) {
			diffs = append(diffs, "headers")
		} else {
			for j := range w.Headers {
				if w.Headers[j] != g.Headers[j] {
					diffs = append(diffs, "headers")
					break
				}
			}
		}
		if len(diffs) > 0 {
			bad++
			if bad <= 5 {
				t.Errorf("%s: record %d differs in %v:\n  produced %v\n  read     %v", who, i, diffs, w, g)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d records differ in all", who, bad)
	}
}

func fromKgo(r *kgo.Record) rec {
	out := rec{Key: r.Key, Value: r.Value, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, hdr{h.Key, string(h.Value)})
	}
	return out
}

func toKgo(topic string, r rec) *kgo.Record {
	out := &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Partition: r.Partition, Timestamp: r.Timestamp}
	for _, h := range r.Headers {
		out.Headers = append(out.Headers, kgo.RecordHeader{Key: h.Key, Value: []byte(h.Value)})
	}
	return out
}

// readKgo reads partition p of topic from offset 0 with franz-go until it has
// n records.
func readKgo(t testing.TB, addr, topic string, p int32, n int) []rec {
	t.Helper()
	end := map[int32]int64{p: int64(n)}
	got := testbroker.ReadRange(t, addr, topic, map[int32]int64{p: 0}, end)
	var out []rec
	for _, r := range got[p] {
		out = append(out, fromKgo(r))
	}
	return out
}

// produceKgo produces recs to topic with one franz-go client, synchronously,
// and returns them with offsets filled in.
func produceKgo(t testing.TB, addr, topic string, recs []rec, opts ...kgo.Opt) []rec {
	t.Helper()
	opts = append([]kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)
	cl := testbroker.NewClient(t, addr, opts...)
	defer cl.Close()
	krs := make([]*kgo.Record, len(recs))
	for i, r := range recs {
		krs[i] = toKgo(topic, r)
	}
	res := cl.ProduceSync(ctxFor(t, time.Minute), krs...)
	if err := res.FirstErr(); err != nil {
		t.Fatalf("franz-go produce to %s: %v", topic, err)
	}
	out := make([]rec, len(recs))
	for i, pr := range res {
		out[i] = fromKgo(pr.Record)
	}
	return out
}

func newAdmin(t testing.TB, addr string) *kadm.Client {
	return kadm.NewClient(testbroker.NewClient(t, addr))
}

// startBroker starts an in-process broker for one test.
func startBroker(t testing.TB, opts ...testbroker.Option) *testbroker.Broker {
	t.Helper()
	return testbroker.Start(t, opts...)
}

// createTopicResp creates one topic and returns the broker's per-topic
// answer (kadm.CreateTopic folds it into the error).
func createTopicResp(t testing.TB, adm *kadm.Client, partitions int32, rf int16, configs map[string]*string, name string) (kadm.CreateTopicResponse, error) {
	t.Helper()
	resps, err := adm.CreateTopics(ctxFor(t, 30*time.Second), partitions, rf, configs, name)
	if err != nil {
		return kadm.CreateTopicResponse{}, err
	}
	return resps.On(name, nil)
}

// emptyAsNull is recs with empty values replaced by null, for clients that
// cannot tell them apart on the read side.
func emptyAsNull(recs []rec) []rec {
	out := make([]rec, len(recs))
	for i, r := range recs {
		if r.Value != nil && len(r.Value) == 0 {
			r.Value = nil
		}
		out[i] = r
	}
	return out
}

func kgoZstd() kgo.Opt { return kgo.ProducerBatchCompression(kgo.ZstdCompression()) }
