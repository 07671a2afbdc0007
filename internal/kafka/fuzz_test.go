package kafka

import (
	"bytes"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzReadFrame feeds arbitrary bytes through the whole request decoding
// path a connection runs before a handler: frame, header, body. It must
// never panic, and a frame it accepts must be within the limit.
func FuzzReadFrame(f *testing.F) {
	for _, seed := range seedFrames() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		const max = 1 << 20
		r := bytes.NewReader(in)
		for {
			frame, err := readFrame(r, max)
			if err != nil {
				return
			}
			if len(frame) > max {
				t.Fatalf("frame of %d bytes accepted over limit %d", len(frame), max)
			}
			hdr, req, body, err := parseHeader(frame)
			if err != nil {
				continue
			}
			if req.Key() != hdr.APIKey {
				t.Fatalf("key mismatch %d != %d", req.Key(), hdr.APIKey)
			}
			if hdr.APIVersion < 0 || hdr.APIVersion > req.MaxVersion() {
				continue // dispatch refuses these before decoding
			}
			_ = req.ReadFrom(body)
		}
	})
}

// seedFrames builds valid frames for the APIs sluice serves, at their
// newest and oldest supported versions, plus classic bad frames.
func seedFrames() [][]byte {
	var out [][]byte
	frame := func(req kmsg.Request, version int16) []byte {
		req.SetVersion(version)
		b := []byte{0, 0, 0, 0}
		b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 7)
		b = binary.BigEndian.AppendUint16(b, 4)
		b = append(b, "fuzz"...)
		if req.IsFlexible() {
			b = append(b, 0)
		}
		b = req.AppendTo(b)
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		return b
	}
	md := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	name := "orders"
	t.Topic = &name
	md.Topics = append(md.Topics, t)
	out = append(out, frame(md, 12), frame(md, 1))

	pr := kmsg.NewPtrProduceRequest()
	pr.Acks = -1
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = "orders"
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Records = make([]byte, 61)
	pt.Partitions = append(pt.Partitions, pp)
	pr.Topics = append(pr.Topics, pt)
	out = append(out, frame(pr, 10), frame(pr, 3))

	fr := kmsg.NewPtrFetchRequest()
	ft := kmsg.NewFetchRequestTopic()
	ft.Topic = "orders"
	ft.Partitions = append(ft.Partitions, kmsg.NewFetchRequestTopicPartition())
	fr.Topics = append(fr.Topics, ft)
	out = append(out, frame(fr, 16), frame(fr, 4))

	out = append(out, frame(kmsg.NewPtrApiVersionsRequest(), 4), frame(kmsg.NewPtrApiVersionsRequest(), 0))
	out = append(out, []byte{0x7f, 0xff, 0xff, 0xff}, []byte{0, 0, 0, 2, 0, 1}, []byte{})

	// The versions Kafka 3.9 served below Kafka 4's floor (issue 20).
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "orders"
	lt.Partitions = append(lt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
	lo.Topics = append(lo.Topics, lt)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group = "g"
	ot := kmsg.NewOffsetCommitRequestTopic()
	ot.Topic = "orders"
	ot.Partitions = append(ot.Partitions, kmsg.NewOffsetCommitRequestTopicPartition())
	oc.Topics = append(oc.Topics, ot)
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dr := kmsg.NewDescribeConfigsRequestResource()
	dr.ResourceType, dr.ResourceName = kmsg.ConfigResourceTypeTopic, "orders"
	dc.Resources = append(dc.Resources, dr)
	out = append(out, frame(fr, 0), frame(lo, 0), frame(oc, 0), frame(oc, 1), frame(dc, 0))
	return out
}

// TestSeedCorpusInTestdata keeps testdata/fuzz/FuzzReadFrame in step with
// seedFrames: run with -update-corpus to rewrite it.
func TestSeedCorpusInTestdata(t *testing.T) {
	dir := filepath.Join("testdata", "fuzz", "FuzzReadFrame")
	seeds := seedFrames()
	if *updateCorpus {
		os.MkdirAll(dir, 0o755)
		for i, s := range seeds {
			body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%02d", i)), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) < len(seeds) {
		t.Fatalf("seed corpus missing in %s (%d files, want >= %d): run go test -run TestSeedCorpusInTestdata -update-corpus", dir, len(ents), len(seeds))
	}
}

var updateCorpus = flag.Bool("update-corpus", false, "rewrite fuzz seed corpora in testdata/")
