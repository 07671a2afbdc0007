package log

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// FuzzAppend drives the produce path of a real engine with arbitrary
// payloads, compressed ones among the seeds (all four codecs, payloads
// mislabelled as compressed, decompression bombs): an append never panics
// and either refuses the payload, keeping nothing of it, or takes all of it
// and gives back exactly those bytes, every record decodable within the
// partition's decompression limit.
func FuzzAppend(f *testing.F) {
	// The seeds are in testdata/fuzz/FuzzAppend (TestGenerateAppendCorpus).
	v := newEnv(f)
	e := v.open()
	// A small limit, so that the seed bombs (8 MiB) are over it.
	e.CreateTopic(bg, "t", 1, map[string]string{"max.message.bytes": "65536"})
	e.CreateTopic(bg, "c", 1, map[string]string{"max.message.bytes": "65536", "cleanup.policy": "compact"})
	limit := batch.DecompressedLimit(65536, batch.DefaultDecompressRatio, batch.DefaultDecompressBudget)
	f.Fuzz(func(t *testing.T, payload []byte) {
		for _, topic := range []string{"t", "c"} {
			p, _ := e.Partition(topic, 0)
			end := p.LogEndOffset()
			in := append([]byte(nil), payload...)
			res, err := p.Append(context.Background(), in, -1)
			if err != nil {
				if after := p.LogEndOffset(); after != end {
					t.Fatalf("%s: refused payload (%v) moved the log end %d -> %d", topic, err, end, after)
				}
				if e.dec.Stats().InUse != 0 {
					t.Fatalf("%s: decompression budget held after a refusal", topic)
				}
				continue
			}
			if !bytes.Equal(in, payload) {
				t.Fatalf("%s: append changed the caller's bytes", topic)
			}
			r, err := p.Read(context.Background(), res.BaseOffset, 1<<30, true)
			if err != nil {
				t.Fatalf("%s: read back at %d: %v", topic, res.BaseOffset, err)
			}
			n := int64(0)
			for b := r.Records; len(b) > 0; {
				size, err := batch.Size(b)
				if err != nil || size > len(b) {
					t.Fatalf("%s: stored batch does not frame: %v", topic, err)
				}
				x, err := e.dec.Records(context.Background(), b[:size], limit)
				if err != nil {
					t.Fatalf("%s: stored batch does not decode: %v", topic, err)
				}
				for i := range x.Records {
					if topic == "c" && x.Records[i].Key == nil {
						t.Fatalf("compacted topic stored a keyless record")
					}
				}
				n += int64(len(x.Records))
				x.Release()
				b = b[size:]
			}
			if got := p.LogEndOffset() - end; got != n {
				t.Fatalf("%s: log grew by %d offsets, read back %d records", topic, got, n)
			}
		}
	})
}

// appendSeeds are valid payloads of every codec and the hostile shapes a
// producer can send.
func appendSeeds(t testing.TB) [][]byte {
	mk := func(codec int8, recs []kmsg.Record) []byte {
		b, err := batch.Build(codec, 1_700_000_000_000, recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	keyed := func(n int) []kmsg.Record {
		recs := make([]kmsg.Record, n)
		for i := range recs {
			recs[i].Key = fmt.Appendf(nil, "k%d", i)
			recs[i].Value = fmt.Appendf(nil, "value %d", i)
			recs[i].Headers = []kmsg.Header{{Key: "h", Value: []byte{byte(i)}}}
		}
		return recs
	}
	mislabel := func(b []byte, codec int8) []byte {
		b = append([]byte(nil), b...)
		binary.BigEndian.PutUint16(b[batch.OffAttributes:], uint16(batch.Attributes(b)|int16(codec)))
		binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.ComputeCRC(b))
		return b
	}
	var seeds [][]byte
	for codec := int8(0); codec <= 4; codec++ {
		seeds = append(seeds, mk(codec, keyed(4)))
		keyless := keyed(3)
		keyless[1].Key = nil
		seeds = append(seeds, mk(codec, keyless))
	}
	for codec := int8(1); codec <= 4; codec++ {
		seeds = append(seeds, mislabel(mk(0, keyed(2)), codec))
	}
	for _, codec := range []int8{1, 3, 4} {
		seeds = append(seeds, mk(codec, []kmsg.Record{{Key: []byte("bomb"), Value: make([]byte, 8<<20)}}))
	}
	return seeds
}

// TestGenerateAppendCorpus rewrites testdata/fuzz/FuzzAppend
// (SLUICE_GEN_CORPUS=1), so plain `go test` runs the seeds too.
func TestGenerateAppendCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_CORPUS") == "" {
		t.Skip("set SLUICE_GEN_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzAppend")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for i, s := range appendSeeds(t) {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
