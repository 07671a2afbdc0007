package compat

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// KafkaJS (npm kafkajs, pinned to 2.2.4 by testdata/kafkajs/package-lock.json)
// is the most used Node.js client. Its scripts live in testdata/kafkajs,
// each taking its arguments as one JSON object and printing one JSON answer;
// scripts/install-test-deps.sh runs npm ci there.

const kafkajsDir = "testdata/kafkajs"

// needKafkaJS returns the node binary, failing (or skipping, with
// SLUICE_SKIP_MISSING_TOOLS=1) when node or the pinned kafkajs is missing.
func needKafkaJS(t testing.TB) string {
	t.Helper()
	node := needTool(t, "node")
	b, err := os.ReadFile(filepath.Join(kafkajsDir, "node_modules", "kafkajs", "package.json"))
	if err != nil {
		missing(t, "kafkajs is not installed in test/compat/"+kafkajsDir+" (npm ci)")
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal(b, &pkg); err != nil || pkg.Version != "2.2.4" {
		missing(t, fmt.Sprintf("kafkajs in test/compat/%s is %q, want 2.2.4 (npm ci)", kafkajsDir, pkg.Version))
	}
	return node
}

// kafkajs runs script with args (marshalled to JSON) and decodes its answer
// into out.
func kafkajs(t testing.TB, script string, args, out any) {
	t.Helper()
	node := needKafkaJS(t)
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	stdout := run(t, nil, 2*time.Minute, node, filepath.Join(kafkajsDir, script), string(js))
	if err := json.Unmarshal(stdout, out); err != nil {
		t.Fatalf("kafkajs %s output %q: %v", script, clip(string(stdout)), err)
	}
}

// kgoGzip: franz-go compresses with snappy by default, and kafkajs reads
// only gzip without a codec plugin (it crashes on snappy batches).
var kgoGzip = kgo.ProducerBatchCompression(kgo.GzipCompression())

// jsRecord is a record as the scripts print it (and take it): strings for
// key, value and header values, null for null.
type jsRecord struct {
	Topic     string       `json:"topic,omitempty"`
	Partition int32        `json:"partition"`
	Offset    int64        `json:"offset"`
	Timestamp int64        `json:"timestamp,omitempty"`
	Key       *string      `json:"key"`
	Value     *string      `json:"value"`
	Headers   [][2]*string `json:"headers,omitempty"`
}

func (r jsRecord) rec() rec {
	out := rec{Partition: r.Partition, Offset: r.Offset}
	if r.Key != nil {
		out.Key = []byte(*r.Key)
	}
	if r.Value != nil {
		out.Value = []byte(*r.Value)
	}
	for _, h := range r.Headers {
		v := ""
		if h[1] != nil {
			v = *h[1]
		}
		out.Headers = append(out.Headers, hdr{*h[0], v})
	}
	return out
}

func strp(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}

// byPartition groups records by partition, in the order given.
func byPartition(recs []rec) map[int32][]rec {
	out := map[int32][]rec{}
	for _, r := range recs {
		out[r.Partition] = append(out[r.Partition], r)
	}
	return out
}

// startKafkaJSBroker starts a broker whose groups rebalance without the
// initial delay, so group tests do not wait on it.
func startKafkaJSBroker(t testing.TB, opts ...testbroker.Option) *testbroker.Broker {
	t.Helper()
	return startBroker(t, append([]testbroker.Option{testbroker.WithConfig(func(c *config.Config) {
		c.Groups.InitialRebalanceDelay = 0
	})}, opts...)...)
}

type jsConsumed struct {
	Records []jsRecord `json:"records"`
	Batches []struct {
		Partition     int32 `json:"partition"`
		FirstOffset   int64 `json:"firstOffset"`
		LastOffset    int64 `json:"lastOffset"`
		HighWatermark int64 `json:"highWatermark"`
		Count         int   `json:"count"`
	} `json:"batches"`
}

func (c jsConsumed) recs() []rec {
	out := make([]rec, len(c.Records))
	for i, r := range c.Records {
		out[i] = r.rec()
	}
	return out
}

// kafkajsProduce sends recs (their Partition set) with produce.js and
// checks kafkajs's report: one base offset per partition, 0 on a new topic.
func kafkajsProduce(t testing.TB, args map[string]any, recs []rec) {
	t.Helper()
	in := make([]map[string]any, len(recs))
	parts := map[int32]bool{}
	for i, r := range recs {
		m := map[string]any{"partition": r.Partition, "key": strp(r.Key), "value": strp(r.Value)}
		if len(r.Headers) > 0 {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = x.Value
			}
			m["headers"] = h
		}
		in[i] = m
		parts[r.Partition] = true
	}
	args["records"] = in
	var meta []struct {
		Partition  int32 `json:"partition"`
		ErrorCode  int16 `json:"errorCode"`
		BaseOffset int64 `json:"baseOffset"`
	}
	kafkajs(t, "produce.js", args, &meta)
	if len(meta) != len(parts) {
		t.Fatalf("kafkajs reported %d partitions written, want %d: %+v", len(meta), len(parts), meta)
	}
	for _, m := range meta {
		if !parts[m.Partition] || m.ErrorCode != 0 || m.BaseOffset != 0 {
			t.Errorf("kafkajs produce report %+v: want partition of %v, error 0, base offset 0", m, parts)
		}
	}
}

// TestKafkaJSProduceConsume: an idempotent kafkajs producer sends keyed
// records with headers to three partitions in gzip batches; franz-go reads
// them back byte for byte, stored gzip with the producer's id; kafkajs reads
// them with eachBatch; a LogAppendTime topic stamps kafkajs's records with
// the broker's time; a committed offset past the end resets to the start;
// and a kafkajs consumer seeks into a partition.
func TestKafkaJSProduceConsume(t *testing.T) {
	b := startKafkaJSBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 3, nil)
	want := sampleRecords(30, sampleOpts{nullKeys: true, nullValues: true, headers: true})
	for i := range want {
		want[i].Partition = int32(i % 3)
	}
	kafkajsProduce(t, map[string]any{"broker": b.Addr(), "topic": topic, "compression": "gzip", "idempotent": true}, want)

	wantBy := byPartition(want)
	t.Run("franz-go reads", func(t *testing.T) {
		start := map[int32]int64{0: 0, 1: 0, 2: 0}
		end := map[int32]int64{0: 10, 1: 10, 2: 10}
		got := testbroker.ReadRange(t, b.Addr(), topic, start, end)
		for p := int32(0); p < 3; p++ {
			var recs []rec
			for i, r := range got[p] {
				if r.ProducerID < 0 || r.ProducerEpoch < 0 {
					t.Errorf("p%d@%d: producer id %d epoch %d, want the idempotent producer's", p, r.Offset, r.ProducerID, r.ProducerEpoch)
				}
				if r.Offset != int64(i) {
					t.Errorf("p%d: record %d at offset %d", p, i, r.Offset)
				}
				recs = append(recs, fromKgo(r))
			}
			checkSame(t, fmt.Sprintf("franz-go reading kafkajs's partition %d", p), wantBy[p], recs)
		}
		checkStoredCodec(t, b.Addr(), topic, "gzip")
	})

	t.Run("eachBatch", func(t *testing.T) {
		var got jsConsumed
		kafkajs(t, "consume.js", map[string]any{"broker": b.Addr(), "topic": topic, "group": topic + "-batch", "count": 30, "mode": "batch"}, &got)
		gotBy := byPartition(got.recs())
		for p := int32(0); p < 3; p++ {
			checkSame(t, fmt.Sprintf("kafkajs eachBatch reading partition %d", p), wantBy[p], gotBy[p])
			for i, r := range gotBy[p] {
				if r.Offset != int64(i) {
					t.Errorf("kafkajs eachBatch p%d: record %d at offset %d", p, i, r.Offset)
				}
			}
		}
		n := 0
		for _, bt := range got.Batches {
			n += bt.Count
			if bt.HighWatermark != 10 || bt.FirstOffset < 0 || bt.LastOffset < bt.FirstOffset || bt.LastOffset > 9 ||
				int(bt.LastOffset-bt.FirstOffset+1) != bt.Count {
				t.Errorf("kafkajs batch %+v: want offsets within 0-9, count matching them, high watermark 10", bt)
			}
		}
		if n != 30 {
			t.Errorf("kafkajs batches held %d records, want 30: %+v", n, got.Batches)
		}
	})

	t.Run("LogAppendTime", func(t *testing.T) {
		topic := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), topic, 1, map[string]string{"message.timestamp.type": "LogAppendTime"})
		before := time.Now().UnixMilli()
		var meta []struct {
			LogAppendTime int64 `json:"logAppendTime"`
		}
		kafkajs(t, "produce.js", map[string]any{"broker": b.Addr(), "topic": topic, "compression": "gzip",
			"records": []any{map[string]any{"partition": 0, "value": "old", "timestamp": 1000000000000}}}, &meta)
		if len(meta) != 1 || meta[0].LogAppendTime < before {
			t.Errorf("produce answer %+v: want the broker's append time (>= %d)", meta, before)
		}
		var got jsConsumed
		kafkajs(t, "consume.js", map[string]any{"broker": b.Addr(), "topic": topic, "group": topic + "-g", "count": 1}, &got)
		if len(got.Records) != 1 || got.Records[0].Timestamp < before || (len(meta) == 1 && got.Records[0].Timestamp != meta[0].LogAppendTime) {
			t.Errorf("kafkajs read %+v: want the append time the produce answered (%+v), not the producer's 1000000000000", got.Records, meta)
		}
	})

	t.Run("offset out of range", func(t *testing.T) {
		// A committed offset past the end: the fetch is OFFSET_OUT_OF_RANGE
		// and kafkajs starts over from the earliest offset.
		topic := topicName(t)
		group := topic + "-g"
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		recs := sampleRecords(5, sampleOpts{})
		produceKgo(t, b.Addr(), topic, recs, kgoGzip)
		adm := newAdmin(t, b.Addr())
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 99, LeaderEpoch: -1})
		if err := adm.CommitAllOffsets(ctxFor(t, 30*time.Second), group, offs); err != nil {
			t.Fatal(err)
		}
		var got jsConsumed
		kafkajs(t, "consume.js", map[string]any{"broker": b.Addr(), "topic": topic, "group": group, "count": 5}, &got)
		checkSame(t, "kafkajs reset from a committed offset past the end", recs, got.recs())
		if len(got.Records) > 0 && got.Records[0].Offset != 0 {
			t.Errorf("kafkajs restarted at offset %d, want 0", got.Records[0].Offset)
		}
	})

	t.Run("seek", func(t *testing.T) {
		topic := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		recs := sampleRecords(10, sampleOpts{headers: true})
		produceKgo(t, b.Addr(), topic, recs, kgoGzip)
		var got jsConsumed
		kafkajs(t, "consume.js", map[string]any{"broker": b.Addr(), "topic": topic, "group": topic + "-seek", "count": 4,
			"seek": map[string]any{"partition": 0, "offset": 6}}, &got)
		checkSame(t, "kafkajs reading after seek to 6", recs[6:], got.recs())
		for i, r := range got.Records {
			if r.Offset != int64(6+i) {
				t.Errorf("kafkajs after seek to 6: record %d at offset %d", i, r.Offset)
			}
		}
	})
}

// TestKafkaJSConsumerGroup: two kafkajs consumers of one group split a
// four-partition topic, each record read once and committed; a consumer
// rejoining the group resumes at the committed offsets.
func TestKafkaJSConsumerGroup(t *testing.T) {
	b := startKafkaJSBroker(t)
	topic := topicName(t)
	group := topic + "-group"
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)

	var members []struct {
		Member   string     `json:"member"`
		Assigned []int32    `json:"assigned"`
		Records  []jsRecord `json:"records"`
	}
	kafkajs(t, "group.js", map[string]any{"broker": b.Addr(), "topic": topic, "group": group, "partitions": 4, "count": 40, "produce": true}, &members)
	if len(members) != 2 {
		t.Fatalf("%d members, want 2", len(members))
	}
	owner := map[int32]string{}
	seen := map[string]int{}
	for _, m := range members {
		if len(m.Records) == 0 {
			t.Errorf("member %s (partitions %v) read nothing", m.Member, m.Assigned)
		}
		for _, p := range m.Assigned {
			owner[p] = m.Member
		}
		for _, r := range m.Records {
			if owner[r.Partition] != m.Member {
				t.Errorf("member %s read p%d@%d, assigned %v", m.Member, r.Partition, r.Offset, m.Assigned)
			}
			if r.Key == nil || r.Value == nil || "v-"+(*r.Key)[2:] != *r.Value {
				t.Errorf("member %s read %v", m.Member, r.rec())
				continue
			}
			seen[*r.Key]++
		}
	}
	if len(owner) != 4 {
		t.Errorf("partitions assigned: %v, want all 4", owner)
	}
	for i := 0; i < 40; i++ {
		if k := fmt.Sprintf("k-%d", i); seen[k] != 1 {
			t.Errorf("record %s read %d times, want once", k, seen[k])
		}
	}

	adm := newAdmin(t, b.Addr())
	committed, err := adm.FetchOffsets(ctxFor(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 4; p++ {
		if o, ok := committed.Lookup(topic, p); !ok || o.At != 10 {
			t.Errorf("committed offset of p%d: %+v (found %v), want 10", p, o, ok)
		}
	}

	// Eight more records, two a partition; a new member of the group reads
	// exactly those, from the committed offsets on.
	var later []rec
	for i := 0; i < 8; i++ {
		later = append(later, rec{Partition: int32(i % 4), Key: []byte(fmt.Sprintf("later-%d", i)), Value: []byte(fmt.Sprintf("v-%d", 40+i))})
	}
	produceKgo(t, b.Addr(), topic, later, kgoGzip)
	var got jsConsumed
	kafkajs(t, "consume.js", map[string]any{"broker": b.Addr(), "topic": topic, "group": group, "count": 8}, &got)
	gotBy, wantBy := byPartition(got.recs()), byPartition(later)
	for p := int32(0); p < 4; p++ {
		checkSame(t, fmt.Sprintf("kafkajs rejoining, partition %d", p), wantBy[p], gotBy[p])
		for i, r := range gotBy[p] {
			if r.Offset != int64(10+i) {
				t.Errorf("kafkajs rejoining read p%d@%d as record %d, want offset %d", p, r.Offset, i, 10+i)
			}
		}
	}
}

// TestKafkaJSTransactions: a read_committed kafkajs consumer sees the
// records of committed transactions and not of the aborted one (a
// read_uncommitted one sees all); with a transaction open the latest
// offset is the last stable one; offsets sent in an aborted transaction
// are not committed; a consume-transform-produce transaction
// commits its output and the group's offsets together (sendOffsets).
func TestKafkaJSTransactions(t *testing.T) {
	b := startKafkaJSBroker(t)
	topic, in, out := topicName(t), topicName(t)+"-in", topicName(t)+"-out"
	lso := topic + "-lso"
	group := topic + "-group"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	testbroker.CreateTopic(t, b.Addr(), lso, 1, nil)
	testbroker.CreateTopic(t, b.Addr(), in, 2, nil)
	testbroker.CreateTopic(t, b.Addr(), out, 1, nil)
	input := []rec{
		{Partition: 0, Key: []byte("k0"), Value: []byte("alpha")},
		{Partition: 1, Key: []byte("k1"), Value: []byte("beta")},
		{Partition: 0, Key: []byte("k2"), Value: []byte("gamma")},
		{Partition: 1, Key: []byte("k3"), Value: []byte("delta")},
		{Partition: 1, Key: []byte("k4"), Value: []byte("epsilon")},
	}
	produceKgo(t, b.Addr(), in, input, kgoGzip)

	var got struct {
		Committed         []jsRecord `json:"committed"`
		Uncommitted       []jsRecord `json:"uncommitted"`
		OffsetsAfterAbort []int64    `json:"offsetsAfterAbort"`
		LSO               struct {
			OffsetsOpen jsOffsets  `json:"offsetsOpen"`
			Records     []jsRecord `json:"records"`
		} `json:"lso"`
		Transformed int `json:"transformed"`
	}
	kafkajs(t, "txn.js", map[string]any{"broker": b.Addr(), "topic": topic, "lso": lso, "in": in, "out": out, "group": group, "count": len(input)}, &got)

	values := func(rs []jsRecord) []string {
		var out []string
		for _, r := range rs {
			out = append(out, *r.Value)
		}
		sort.Strings(out)
		return out
	}
	wantCommitted := []string{"c-0", "c-1", "c-2", "c-3", "c-4", "c-5", "c-6", "c-7", "c-8", "c-9"}
	if v := values(got.Committed); fmt.Sprint(v) != fmt.Sprint(wantCommitted) {
		t.Errorf("read_committed kafkajs read %v, want %v", v, wantCommitted)
	}
	wantAll := append([]string{"a-0", "a-1", "a-2"}, wantCommitted...)
	if v := values(got.Uncommitted); fmt.Sprint(v) != fmt.Sprint(wantAll) {
		t.Errorf("read_uncommitted kafkajs read %v, want %v", v, wantAll)
	}
	// ListOffsets read committed answers the last stable offset (1) while
	// the transaction over offsets 1-2 is open: the high watermark is 3.
	if g := got.LSO.OffsetsOpen.String(); g != " 0:0-1" {
		t.Errorf("fetchTopicOffsets with a transaction open: %s, want offset and high 1 (the last stable offset)", g)
	}
	var lsoRead []string
	for _, r := range got.LSO.Records {
		lsoRead = append(lsoRead, fmt.Sprintf("%s@%d", *r.Value, r.Offset))
	}
	// Offset 3 is the commit marker.
	if g := fmt.Sprint(lsoRead); g != "[open-0@1 open-1@2 after@4]" {
		t.Errorf("read_committed consumer from the latest offset, the transaction open: read %s, want [open-0@1 open-1@2 after@4]", g)
	}
	if fmt.Sprint(got.OffsetsAfterAbort) != "[-1 -1]" {
		t.Errorf("group offsets after a transaction that sent offsets 1 and aborted: %v, want none ([-1 -1])", got.OffsetsAfterAbort)
	}
	if got.Transformed != len(input) {
		t.Errorf("transformed %d records, want %d", got.Transformed, len(input))
	}

	// The output, read committed by franz-go, and the group's offsets.
	recs := testbroker.ReadRange(t, b.Addr(), out, map[int32]int64{0: 0}, map[int32]int64{0: int64(len(input))},
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	var outVals []string
	for _, r := range recs[0] {
		outVals = append(outVals, string(r.Value))
	}
	sort.Strings(outVals)
	if want := "[ALPHA BETA DELTA EPSILON GAMMA]"; fmt.Sprint(outVals) != want {
		t.Errorf("transformed output %v, want %s", outVals, want)
	}
	committed, err := newAdmin(t, b.Addr()).FetchOffsets(ctxFor(t, 30*time.Second), group)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[int32]int64{0: 2, 1: 3} {
		if o, ok := committed.Lookup(in, p); !ok || o.At != want {
			t.Errorf("offset sent in the transaction for %s p%d: %+v (found %v), want %d", in, p, o, ok, want)
		}
	}
}
