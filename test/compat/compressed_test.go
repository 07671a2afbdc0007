package compat

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// recompute rewrites a batch's CRC after its covered bytes changed.
func recompute(b []byte) { binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.ComputeCRC(b)) }

// endOffset is the partition's high watermark, by ListOffsets.
func endOffset(t testing.TB, br *kgo.Broker, topic string, p int32) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = p, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := request[*kmsg.ListOffsetsResponse](t, br, req)
	part := resp.Topics[0].Partitions[0]
	if part.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(part.ErrorCode))
	}
	return part.Offset
}

// TestCorruptCompressedBatchRefused: a batch whose attributes say gzip (or
// any codec) but whose payload is not, under a correct CRC, is refused with
// CORRUPT_MESSAGE and nothing of it is stored, so consumers never meet it:
// franz-go and kcat read every good record around it without an error.
func TestCorruptCompressedBatchRefused(t *testing.T) {
	b := startBroker(t)
	br := seed(t, b.Addr())
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)

	var want []rec
	for _, codec := range codecs[1:] {
		good := produceKgo(t, b.Addr(), topic, sampleRecords(5, sampleOpts{}), kgo.ProducerBatchCompression(kgoCodec(codec)))
		want = append(want, good...)
		bad := recordBatch([]byte("not"), []byte("compressed"))
		attrs := binary.BigEndian.Uint16(bad[batch.OffAttributes:])
		binary.BigEndian.PutUint16(bad[batch.OffAttributes:], attrs|uint16(codecID(codec)))
		recompute(bad)
		p := produceRaw(t, br, topic, 0, bad)
		wantCode(t, codec+" payload that is not "+codec, p.ErrorCode, kerr.CorruptMessage)
		if p.ErrorMessage == nil || !strings.Contains(*p.ErrorMessage, "decompress") {
			t.Fatalf("%s: error message %v does not say what is wrong", codec, p.ErrorMessage)
		}
		if end := endOffset(t, br, topic, 0); end != int64(len(want)) {
			t.Fatalf("after the refused %s batch the log ends at %d, want %d", codec, end, len(want))
		}
	}
	got := readKgo(t, b.Addr(), topic, 0, len(want))
	for i := range got {
		if got[i].Offset != int64(i) {
			t.Fatalf("record %d at offset %d", i, got[i].Offset)
		}
	}
	{
		kcat := needTool(t, "kcat")
		out := run(t, nil, 2*time.Minute, kcat, "-C", "-b", b.Addr(), "-t", topic, "-p", "0", "-o", "beginning", "-e", "-q", "-f", "%o\n")
		if n := strings.Count(string(out), "\n"); n != len(want) {
			t.Fatalf("kcat read %d records, want %d: %s", n, len(want), out)
		}
	}
}

func codecID(name string) int8 {
	for i, c := range codecs {
		if c == name {
			return int8(i)
		}
	}
	panic(name)
}

// TestDecompressionBombRefused: a small compressed batch that would
// decompress past its limit (32 x max.message.bytes) is refused with
// MESSAGE_TOO_LARGE before the broker holds its output, and nothing of it
// is stored. Under a larger max.message.bytes the same batch is taken.
func TestDecompressionBombRefused(t *testing.T) {
	b := startBroker(t)
	br := seed(t, b.Addr())
	small, big := topicName(t)+"-small", topicName(t)+"-big"
	testbroker.CreateTopic(t, b.Addr(), small, 1, map[string]string{"max.message.bytes": "100000"})
	testbroker.CreateTopic(t, b.Addr(), big, 1, map[string]string{"max.message.bytes": "4000000"})
	for _, codec := range []int8{1, 2, 3, 4} {
		bomb, err := batch.Build(codec, time.Now().UnixMilli(), []kmsg.Record{{Key: []byte("k"), Value: make([]byte, 24<<20)}})
		if err != nil {
			t.Fatal(err)
		}
		if len(bomb) > 100000 && codec != 2 {
			t.Fatalf("codec %d: the bomb is %d bytes, over the small topic's max.message.bytes", codec, len(bomb))
		}
		if codec == 2 { // snappy compresses zeros ~20x: give it its own topic size
			continue
		}
		p := produceRaw(t, br, small, 0, bomb)
		wantCode(t, fmt.Sprintf("codec %d batch of %d bytes holding 24 MiB", codec, len(bomb)), p.ErrorCode, kerr.MessageTooLarge)
		if end := endOffset(t, br, small, 0); end != 0 {
			t.Fatalf("codec %d: refused bomb stored (end %d)", codec, end)
		}
		// 4,000,000 x 32 is 128 MB: taken and readable.
		p = produceRaw(t, br, big, 0, bomb)
		wantCode(t, fmt.Sprintf("codec %d batch under the big topic's limit", codec), p.ErrorCode, nil)
	}
	got := readKgo(t, b.Addr(), big, 0, 3)
	for _, r := range got {
		if len(r.Value) != 24<<20 {
			t.Fatalf("read back %d bytes, want %d", len(r.Value), 24<<20)
		}
	}
}

// TestRecordErrors is KIP-467, as librdkafka's 0011 test checks it: a
// compacted topic's batch with keyless records is refused whole with
// INVALID_RECORD, the response naming each keyless record by its index, and
// nothing of it is stored; records with keys are taken.
func TestRecordErrors(t *testing.T) {
	b := startBroker(t)
	br := seed(t, b.Addr())
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, map[string]string{"cleanup.policy": "compact"})

	for _, codec := range []int8{0, 3, 4} {
		recs := make([]kmsg.Record, 100)
		for i := range recs {
			recs[i].OffsetDelta = int32(i)
			recs[i].Value = fmt.Appendf(nil, "message %d", i)
			if i%10 != 0 {
				recs[i].Key = recs[i].Value
			}
		}
		bt, err := batch.Build(codec, time.Now().UnixMilli(), recs)
		if err != nil {
			t.Fatal(err)
		}
		p := produceRaw(t, br, topic, 0, bt)
		wantCode(t, "keyless records in a compacted topic", p.ErrorCode, kerr.InvalidRecord)
		if len(p.ErrorRecords) != 10 {
			t.Fatalf("codec %d: %d record errors, want 10: %+v", codec, len(p.ErrorRecords), p.ErrorRecords)
		}
		for i, re := range p.ErrorRecords {
			if re.RelativeOffset != int32(10*i) || re.ErrorMessage == nil ||
				*re.ErrorMessage != "Compacted topic cannot accept message without key in topic partition "+topic+"-0." {
				t.Fatalf("record error %d: index %d message %v", i, re.RelativeOffset, re.ErrorMessage)
			}
		}
		if p.ErrorMessage == nil || !strings.HasPrefix(*p.ErrorMessage, "One or more records have been rejected due to 10 record errors") {
			t.Fatalf("error message %v", p.ErrorMessage)
		}
		if end := endOffset(t, br, topic, 0); end != 0 {
			t.Fatalf("codec %d: part of a refused batch was stored (end %d)", codec, end)
		}
	}

	// librdkafka fails every record of a refused batch: the keyless ones
	// with INVALID_RECORD (and, from 2.2 on, the rest as innocent
	// bystanders, _INVALID_DIFFERENT_RECORD). Only keyed records are ever
	// delivered, and exactly those are stored.
	py := pyClients[0]
	needPythonModule(t, py.module, py.pkg)
	in := make([]pyRecord, 100)
	for i := range in {
		p := int32(0)
		in[i] = pyRecord{Partition: &p, Value: b64(fmt.Appendf(nil, "message %d", i))}
		if i%10 != 0 {
			in[i].Key = in[i].Value
		}
	}
	js, _ := json.Marshal(in)
	var reports []pyRecord
	out := py.run(t, js, "produce", b.Addr(), topic, "none")
	if err := json.Unmarshal(out, &reports); err != nil {
		t.Fatalf("produce output %q: %v", out, err)
	}
	invalid, delivered := 0, int64(0)
	for i, r := range reports {
		if r.Error == "" {
			if i%10 == 0 {
				t.Fatalf("librdkafka's keyless record %d was delivered", i)
			}
			delivered++
			continue
		}
		if i%10 == 0 && strings.Contains(r.Error, "INVALID_RECORD") {
			invalid++
		}
	}
	t.Logf("librdkafka: %d reports, %d keyless failed with INVALID_RECORD, %d delivered; first: %+v", len(reports), invalid, delivered, reports[1])
	if invalid != 10 {
		t.Fatalf("%d keyless records failed with INVALID_RECORD, want 10: %v", invalid, reports[:3])
	}
	if end := endOffset(t, br, topic, 0); end != delivered {
		t.Fatalf("the log ends at %d after %d records were delivered", end, delivered)
	}
}
