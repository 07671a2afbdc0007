package compat

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// Requests at the versions Kafka 3.9 served and Kafka 4 dropped (KIP-896),
// sent raw over TCP at a pinned version and decoded with kmsg at that
// version, so each answer is checked as an old client reads it.

// legacyCodecs are the codecs message formats 0 and 1 carry (not zstd).
var legacyCodecs = []string{"none", "gzip", "snappy", "lz4"}

// oldRequest sends req at version v on c and decodes the answer at v. A
// closed connection (the broker refusing the version) fails the test.
func oldRequest[R kmsg.Response](t testing.TB, c net.Conn, req kmsg.Request, v int16) R {
	t.Helper()
	req.SetVersion(v)
	in, err := rawFrame(t, c, requestFrame(req))
	if err != nil {
		t.Fatalf("%s v%d: no answer: %v", kmsg.NameForKey(req.Key()), v, err)
	}
	resp := req.ResponseKind()
	resp.SetVersion(v)
	body := in[4:] // correlation id
	if resp.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		body = body[1:] // no tagged fields in the header (ApiVersions has none)
	}
	if err := resp.ReadFrom(body); err != nil {
		t.Fatalf("%s v%d: undecodable answer: %v", kmsg.NameForKey(req.Key()), v, err)
	}
	return resp.(R)
}

// TestOldVersionsAdvertised: ApiVersions lists, for every API sluice
// serves that Kafka 3.9 served, every version from 0, as Kafka 3.9 did,
// so clients pinned to old versions find theirs.
func TestOldVersionsAdvertised(t *testing.T) {
	b := startBroker(t)
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "t", "1"
	resp := oldRequest[*kmsg.ApiVersionsResponse](t, dial(t, b.Addr()), av, 3)
	v39 := kversion.V3_9_0()
	served := 0
	for _, k := range resp.ApiKeys {
		max39, ok := v39.LookupMaxKeyVersion(k.ApiKey)
		if !ok {
			continue
		}
		served++
		if k.MinVersion != 0 {
			t.Errorf("%s: versions %d-%d, Kafka 3.9 served 0-%d", kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion, max39)
		}
	}
	if served < 40 {
		t.Errorf("only %d of Kafka 3.9's APIs advertised", served)
	}
}

// produceN produces n records ("v0".."v<n-1>", keys "k<i>") to partition 0
// of topic with franz-go, in batches of about per records, with codec.
func produceN(t testing.TB, addr, topic string, n, per int, codec string) {
	t.Helper()
	cl := testbroker.NewClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgoCodec(codec)), kgo.MaxBufferedRecords(per), kgo.ProducerLinger(0))
	defer cl.Close()
	for i := 0; i < n; i += per {
		var rs []*kgo.Record
		for j := i; j < min(i+per, n); j++ {
			rs = append(rs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%d", j)), Value: []byte(fmt.Sprintf("v%d", j)),
				Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("dropped")}}})
		}
		if err := cl.ProduceSync(ctxFor(t, time.Minute), rs...).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
}

// TestOldListOffsetsV0: v0's list answers (Kafka's legacy
// fetchOffsetsBefore): latest is the high watermark then the log start,
// cut to max_num_offsets; earliest the log start; a time the first offset
// at or after it then the log start, or nothing when no record is older.
func TestOldListOffsetsV0(t *testing.T) {
	b := startBroker(t)
	adm := newAdmin(t, b.Addr())
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	before := time.Now().UnixMilli() - 1
	produceN(t, b.Addr(), topic, 10, 5, "none")
	c := dial(t, b.Addr())
	list := func(ts int64, max int32) (int16, []int64) {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Timestamp, rp.MaxNumOffsets = ts, max
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := oldRequest[*kmsg.ListOffsetsResponse](t, c, req, 0)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("ListOffsets v0 answer %+v", resp)
		}
		p := resp.Topics[0].Partitions[0]
		return p.ErrorCode, p.OldStyleOffsets
	}
	check := func(what string, ts int64, max int32, want ...int64) {
		t.Helper()
		code, offs := list(ts, max)
		if code != 0 || fmt.Sprint(offs) != fmt.Sprint(want) {
			t.Errorf("%s (timestamp %d, max %d): code %d offsets %v, want %v", what, ts, max, code, offs, want)
		}
	}
	check("latest, one offset (Burrow, sarama < 0.10.1)", -1, 1, 10)
	check("latest, several", -1, 10, 10, 0)
	check("earliest", -2, 10, 0)
	check("max 0", -1, 0)
	check("a time before every record", before-60_000, 10)
	check("a time after every record", time.Now().UnixMilli()+60_000, 10, 10, 0)
	if code, _ := list(-1, -1); code != kerr.InvalidRequest.Code {
		t.Errorf("max_num_offsets -1: code %d, want INVALID_REQUEST", code)
	}

	// After DeleteRecords the log start moves.
	if _, err := adm.DeleteRecords(ctxFor(t, 30*time.Second), kadmOffsets(topic, 0, 4)); err != nil {
		t.Fatal(err)
	}
	check("earliest after DeleteRecords", -2, 10, 4)
	check("latest after DeleteRecords", -1, 10, 10, 4)

	// An unknown topic: the error, and an empty list.
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "no-such-topic-v0"
	rt.Partitions = []kmsg.ListOffsetsRequestTopicPartition{kmsg.NewListOffsetsRequestTopicPartition()}
	req.Topics = append(req.Topics, rt)
	resp := oldRequest[*kmsg.ListOffsetsResponse](t, c, req, 0)
	p := resp.Topics[0].Partitions[0]
	wantCode(t, "ListOffsets v0 of an unknown topic", p.ErrorCode, kerr.UnknownTopicOrPartition)
	if len(p.OldStyleOffsets) != 0 {
		t.Errorf("unknown topic: offsets %v", p.OldStyleOffsets)
	}
}

// legacyMessage is a message read back from a Fetch v0-v3 answer.
type legacyMessage struct {
	offset     int64
	magic      int8
	ts         int64
	key, value []byte
}

// readMessageSet decodes a message set with kmsg's MessageV0/MessageV1,
// checking every CRC and unwrapping compressed wrappers with franz-go's
// decompressor, as a franz-go consumer would. A partial message at the end
// is ignored (it is what a size-limited old fetch ends with).
func readMessageSet(t testing.TB, set []byte, wantMagic int8) []legacyMessage {
	t.Helper()
	dec := kgo.DefaultDecompressor()
	var out []legacyMessage
	for len(set) >= 17 {
		size := int(binary.BigEndian.Uint32(set[8:]))
		if 12+size > len(set) {
			break
		}
		raw := set[:12+size]
		set = set[12+size:]
		if magic := int8(raw[16]); magic != wantMagic {
			t.Fatalf("message of magic %d, want %d", magic, wantMagic)
		}
		if crc := binary.BigEndian.Uint32(raw[12:]); crc != crc32.ChecksumIEEE(raw[16:]) {
			t.Fatalf("message at offset %d: bad CRC", binary.BigEndian.Uint64(raw))
		}
		var m legacyMessage
		var attrs int8
		if wantMagic == 0 {
			var v kmsg.MessageV0
			if err := v.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			m = legacyMessage{offset: v.Offset, magic: v.Magic, ts: -1, key: v.Key, value: v.Value}
			attrs = v.Attributes
		} else {
			var v kmsg.MessageV1
			if err := v.ReadFrom(raw); err != nil {
				t.Fatal(err)
			}
			m = legacyMessage{offset: v.Offset, magic: v.Magic, ts: v.Timestamp, key: v.Key, value: v.Value}
			attrs = v.Attributes
		}
		codec := attrs & 0x07
		if codec == 0 {
			out = append(out, m)
			continue
		}
		inner, err := dec.Decompress(m.value, kgo.CompressionCodecType(codec))
		if err != nil {
			t.Fatalf("wrapper at offset %d (codec %d): %v", m.offset, codec, err)
		}
		ins := readMessageSet(t, inner, wantMagic)
		for i := range ins {
			if wantMagic == 1 { // relative inner offsets
				ins[i].offset += m.offset - ins[len(ins)-1].offset
			}
		}
		out = append(out, ins...)
	}
	return out
}

func fetchOld(t testing.TB, c net.Conn, topic string, v int16, offset int64, partMax int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis = 100
	req.MinBytes = 1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.PartitionMaxBytes = offset, partMax
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := oldRequest[*kmsg.FetchResponse](t, c, req, v)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("Fetch v%d answer %+v", v, resp)
	}
	return resp.Topics[0].Partitions[0]
}

// TestOldFetch: Fetch v0-v3 answer message sets of magic 0 (v0-v1) and 1
// (v2-v3) holding every record, uncompressed and with each codec legacy
// formats carry, keys and values intact, headers dropped, magic 1 with the
// records' timestamps; zstd is UNSUPPORTED_COMPRESSION_TYPE; v0-v2 cut an
// answer at the partition's max bytes, v3 keeps the first batch whole.
func TestOldFetch(t *testing.T) {
	b := startBroker(t)
	start := time.Now().Add(-time.Minute)
	for _, codec := range legacyCodecs {
		topic := topicName(t) + "-" + codec
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		produceN(t, b.Addr(), topic, 25, 10, codec)
		for v := int16(0); v <= 3; v++ {
			t.Run(fmt.Sprintf("%s/v%d", codec, v), func(t *testing.T) {
				magic := int8(v / 2)
				c := dial(t, b.Addr())
				var got []legacyMessage
				for off := int64(0); off < 25 && len(got) < 200; {
					p := fetchOld(t, c, topic, v, off, 1<<20)
					if p.ErrorCode != 0 || p.HighWatermark != 25 {
						t.Fatalf("code %d, high watermark %d", p.ErrorCode, p.HighWatermark)
					}
					ms := readMessageSet(t, p.RecordBatches, magic)
					if len(ms) == 0 {
						t.Fatalf("no messages at offset %d", off)
					}
					for _, m := range ms {
						if m.offset >= off { // a wrapper may start before the fetch offset
							got = append(got, m)
						}
					}
					off = got[len(got)-1].offset + 1
				}
				if len(got) != 25 {
					t.Fatalf("read %d messages, want 25", len(got))
				}
				for i, m := range got {
					if m.offset != int64(i) || string(m.key) != fmt.Sprintf("k%d", i) || string(m.value) != fmt.Sprintf("v%d", i) {
						t.Fatalf("message %d: offset %d key %q value %q", i, m.offset, m.key, m.value)
					}
					if magic == 1 && (m.ts < start.UnixMilli() || m.ts > time.Now().UnixMilli()) {
						t.Fatalf("message %d: timestamp %d", i, m.ts)
					}
				}
			})
		}
	}

	t.Run("zstd", func(t *testing.T) {
		topic := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		produceN(t, b.Addr(), topic, 5, 5, "zstd")
		c := dial(t, b.Addr())
		for v := int16(0); v <= 3; v++ {
			p := fetchOld(t, c, topic, v, 0, 1<<20)
			wantCode(t, fmt.Sprintf("Fetch v%d of zstd records", v), p.ErrorCode, kerr.UnsupportedCompressionType)
		}
		// Newer fetchers still read them.
		if got := readKgo(t, b.Addr(), topic, 0, 5); len(got) != 5 {
			t.Errorf("franz-go read %d records", len(got))
		}
	})

	t.Run("limits", func(t *testing.T) {
		topic := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		produceN(t, b.Addr(), topic, 30, 30, "none") // one batch
		c := dial(t, b.Addr())
		for v := int16(0); v <= 2; v++ {
			p := fetchOld(t, c, topic, v, 0, 100)
			if p.ErrorCode != 0 || len(p.RecordBatches) != 100 {
				t.Fatalf("v%d with 100 max bytes: code %d, %d bytes", v, p.ErrorCode, len(p.RecordBatches))
			}
			ms := readMessageSet(t, p.RecordBatches, int8(v/2))
			if len(ms) == 0 || len(ms) > 3 || ms[0].offset != 0 {
				t.Fatalf("v%d cut answer holds %d whole messages", v, len(ms))
			}
		}
		p := fetchOld(t, c, topic, 3, 0, 100)
		if ms := readMessageSet(t, p.RecordBatches, 1); len(ms) != 30 {
			t.Fatalf("v3 with 100 max bytes: %d messages, want the first batch's 30", len(ms))
		}
	})

	t.Run("transactional", func(t *testing.T) {
		// Control batches are left out; transactional records stay
		// (v0-v3 readers are read_uncommitted).
		topic := topicName(t)
		testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
		cl := testbroker.NewClient(t, b.Addr(), kgo.TransactionalID("old-fetch-"+topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		defer cl.Close()
		for i, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctxFor(t, time.Minute), &kgo.Record{Topic: topic, Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			if err := cl.EndTransaction(ctxFor(t, time.Minute), commit); err != nil {
				t.Fatal(err)
			}
		}
		produceN(t, b.Addr(), topic, 1, 1, "none") // offset 4, after two markers
		ms := readMessageSet(t, fetchOld(t, dial(t, b.Addr()), topic, 2, 0, 1<<20).RecordBatches, 1)
		var offs []int64
		for _, m := range ms {
			offs = append(offs, m.offset)
		}
		if fmt.Sprint(offs) != "[0 2 4]" {
			t.Errorf("offsets read %v, want [0 2 4] (markers at 1 and 3 left out)", offs)
		}
	})
}

// TestOldFetchFranzGo: franz-go consumers pinned to Kafka 0.8-0.10.1's
// versions (Fetch v0-v3, ListOffsets v0-v1) read everything back.
func TestOldFetchFranzGo(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	want := produceKgo(t, b.Addr(), topic, sampleRecords(40, allShapes), kgo.ProducerBatchCompression(kgo.SnappyCompression()))
	for _, pin := range []struct {
		name string
		v    *kversion.Versions
	}{{"0.8.0", kversion.V0_8_0()}, {"0.9.0", kversion.V0_9_0()}, {"0.10.0", kversion.V0_10_0()}, {"0.10.1", kversion.V0_10_1()}} {
		t.Run(pin.name, func(t *testing.T) {
			cl := testbroker.NewClient(t, b.Addr(), kgo.MaxVersions(pin.v),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
			defer cl.Close()
			var got []rec
			ctx := ctxFor(t, time.Minute)
			for len(got) < len(want) {
				fs := cl.PollFetches(ctx)
				if err := ctx.Err(); err != nil {
					t.Fatalf("read %d of %d records: %v", len(got), len(want), err)
				}
				fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
				fs.EachRecord(func(r *kgo.Record) {
					g := fromKgo(r)
					g.Headers = nil
					got = append(got, g)
				})
			}
			noHeaders := make([]rec, len(want))
			for i, r := range want {
				r.Headers = nil
				noHeaders[i] = r
			}
			checkSame(t, "franz-go at "+pin.name, noHeaders, got)
			for i := range got {
				if got[i].Offset != int64(i) {
					t.Fatalf("record %d at offset %d", i, got[i].Offset)
				}
			}
		})
	}
}

// kadmOffsets is a DeleteRecords or commit target: offset in partition p.
func kadmOffsets(topic string, p int32, offset int64) kadm.Offsets {
	o := kadm.Offsets{}
	o.Add(kadm.Offset{Topic: topic, Partition: p, At: offset, LeaderEpoch: -1})
	return o
}

// BenchmarkOldFetch measures what down-conversion costs a fetch over TCP:
// the same 4 MiB of 1 KiB records (batches of 100) read at Fetch v4
// (record batches as stored), v2 (message format 1) and v0 (format 0),
// 1 MiB per request. MB/s is of the bytes answered (compressed, for lz4),
// records/s of the records they hold.
func BenchmarkOldFetch(b *testing.B) {
	br := startBroker(b)
	for _, codec := range []string{"none", "lz4"} {
		topic := topicName(b) + "-" + codec
		testbroker.CreateTopic(b, br.Addr(), topic, 1, nil)
		cl := testbroker.NewClient(b, br.Addr(), kgo.RecordPartitioner(kgo.ManualPartitioner()),
			kgo.ProducerBatchCompression(kgoCodec(codec)), kgo.ProducerLinger(0))
		value := make([]byte, 1024)
		for i := range value {
			value[i] = byte('a' + i%23)
		}
		for n := 0; n < 4096; n += 100 {
			var rs []*kgo.Record
			for j := 0; j < 100; j++ {
				rs = append(rs, &kgo.Record{Topic: topic, Value: value})
			}
			if err := cl.ProduceSync(ctxFor(b, time.Minute), rs...).FirstErr(); err != nil {
				b.Fatal(err)
			}
		}
		cl.Close()
		for _, v := range []int16{4, 2, 0} {
			b.Run(fmt.Sprintf("%s/v%d", codec, v), func(b *testing.B) {
				c := dial(b, br.Addr())
				// Records answered from each offset asked, counted once,
				// outside the timing.
				offsets := []int64{0, 1000, 2000, 3000}
				records := map[int64]int{}
				for _, off := range offsets {
					p := fetchOld(b, c, topic, v, off, 1<<20)
					records[off] = countRecords(b, p.RecordBatches, v)
				}
				var bytes, recs int64
				i := 0
				b.ReportAllocs()
				for b.Loop() {
					off := offsets[i%len(offsets)]
					i++
					p := fetchOld(b, c, topic, v, off, 1<<20)
					if p.ErrorCode != 0 || len(p.RecordBatches) == 0 {
						b.Fatalf("code %d, %d bytes at %d", p.ErrorCode, len(p.RecordBatches), off)
					}
					bytes += int64(len(p.RecordBatches))
					recs += int64(records[off])
				}
				b.SetBytes(bytes / int64(b.N))
				b.ReportMetric(float64(recs)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

// countRecords counts the records of a Fetch answer at version v.
func countRecords(t testing.TB, set []byte, v int16) int {
	t.Helper()
	if v <= 3 {
		return len(readMessageSet(t, set, int8(v/2)))
	}
	n := 0
	for len(set) >= 61 {
		size := 12 + int(binary.BigEndian.Uint32(set[8:]))
		if size > len(set) {
			break
		}
		n += int(binary.BigEndian.Uint32(set[57:]))
		set = set[size:]
	}
	return n
}
