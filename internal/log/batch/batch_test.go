package batch

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func build(t testing.TB, codec int8, n int) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		recs[i].Key = fmt.Appendf(nil, "k%d", i)
		recs[i].Value = fmt.Appendf(nil, "value-%d", i)
		recs[i].Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}}
	}
	b, err := Build(codec, 1000, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var noLimits = Limits{BeforeMaxMs: math.MaxInt64, AfterMaxMs: math.MaxInt64, Decompressor: NewDecompressor(0)}

// decode decodes b whole with a fresh decompressor.
func decode(t testing.TB, b []byte) (Header, []kmsg.Record, error) {
	x, err := NewDecompressor(0).Records(context.Background(), b, 0)
	if err != nil {
		return Header{}, nil, err
	}
	return x.Header, x.Records, nil
}

func TestValidateRoundTrip(t *testing.T) {
	for codec := int8(0); codec <= 4; codec++ {
		b := build(t, codec, 7)
		s, err := Validate(context.Background(), b, noLimits)
		if err != nil || s.Batches != 1 || s.Records != 7 {
			t.Fatalf("codec %d: %+v %v", codec, s, err)
		}
		h, recs, err := decode(t, b)
		if err != nil || len(recs) != 7 || string(recs[6].Value) != "value-6" || h.Codec() != codec {
			t.Fatalf("codec %d: decode %v", codec, err)
		}
		SetBaseOffset(b, 100)
		SetLeaderEpoch(b, 3)
		if !CheckCRC(b) || LastOffset(b) != 106 {
			t.Fatal("base offset rewrite broke the CRC or offsets")
		}
		SetLogAppendTime(b, 5555)
		if !CheckCRC(b) || MaxTimestamp(b) != 5555 || Attributes(b)&AttrLogAppendTime == 0 {
			t.Fatal("LogAppendTime patch")
		}
	}
}

func TestValidateErrors(t *testing.T) {
	good := build(t, 0, 3)
	mut := func(f func([]byte)) []byte { b := append([]byte(nil), good...); f(b); return b }
	recrc := func(b []byte) {
		copy(b[OffCRC:], []byte{0, 0, 0, 0})
		v := ComputeCRC(b)
		b[17], b[18], b[19], b[20] = byte(v>>24), byte(v>>16), byte(v>>8), byte(v)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		lim  Limits
		want error
	}{
		{"count mismatch", mut(func(b []byte) { b[OffRecordCount+3] = 2; recrc(b) }), noLimits, ErrInvalidRecord},
		{"zero count", mut(func(b []byte) { b[OffRecordCount+3] = 0; recrc(b) }), noLimits, ErrInvalidRecord},
		{"control", mut(func(b []byte) { b[OffAttributes+1] |= AttrControl; recrc(b) }), noLimits, ErrInvalidRecord},
		{"codec 7", mut(func(b []byte) { b[OffAttributes+1] |= 7; recrc(b) }), noLimits, ErrCorrupt},
		{"record length", mut(func(b []byte) { b[HeaderSize] = 0x7e; recrc(b) }), noLimits, ErrCorrupt},
		{"too large", good, Limits{MaxBatchBytes: 10, BeforeMaxMs: math.MaxInt64, AfterMaxMs: math.MaxInt64}, ErrTooLarge},
		{"future", good, Limits{Now: 0, BeforeMaxMs: math.MaxInt64, AfterMaxMs: 10}, ErrInvalidTimestamp},
		{"batch length", mut(func(b []byte) { b[OffLength] = 0x7f }), noLimits, ErrCorrupt},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Validate(context.Background(), tc.b, tc.lim); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRebuildKeepsOffsets(t *testing.T) {
	b := build(t, 4, 5)
	SetBaseOffset(b, 50)
	h, recs, _ := decode(t, b)
	nb, err := Rebuild(h, []kmsg.Record{recs[1], recs[4]})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Validate(context.Background(), nb, noLimits); err == nil {
		t.Fatal("rebuilt batch with holes should fail the producer count check")
	}
	h2, recs2, err := decode(t, nb)
	if err != nil || !CheckCRC(nb) || h2.BaseOffset != 50 || h2.LastOffset() != 54 || len(recs2) != 2 ||
		recs2[1].OffsetDelta != 4 || string(recs2[1].Value) != "value-4" {
		t.Fatalf("rebuild: %+v %v", h2, err)
	}
}

func FuzzValidate(f *testing.F) {
	for codec := int8(0); codec <= 4; codec++ {
		f.Add(build(f, codec, 3))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		d := NewDecompressor(64 << 20)
		s, err := Validate(context.Background(), b, Limits{Now: 1000, BeforeMaxMs: math.MaxInt64, AfterMaxMs: math.MaxInt64,
			RequireKey: true, Decompressor: d, MaxDecompressedBytes: 1 << 20})
		if st := d.Stats(); st.InUse != 0 {
			t.Fatalf("%d budget bytes still held after Validate", st.InUse)
		}
		if err != nil {
			return
		}
		// Accepted payloads must be walkable batch by batch and decode.
		n, recs := 0, int64(0)
		for rest := b; len(rest) > 0; n++ {
			size, err := Size(rest)
			if err != nil || size > len(rest) {
				t.Fatalf("accepted payload does not frame: %v", err)
			}
			h, _ := ParseHeader(rest)
			x, err := d.Records(context.Background(), rest[:size], 1<<20)
			if err != nil || len(x.Records) != int(h.RecordCount) {
				t.Fatalf("accepted batch (codec %d) does not decode: %v", h.Codec(), err)
			}
			for i := range x.Records {
				if x.Records[i].Key == nil {
					t.Fatalf("accepted a keyless record with RequireKey")
				}
			}
			x.Release()
			recs += int64(h.RecordCount)
			rest = rest[size:]
		}
		if n != s.Batches || recs != s.Records {
			t.Fatalf("summary %+v, walked %d batches %d records", s, n, recs)
		}
	})
}

// TestGenerateCorpus rewrites testdata/fuzz/FuzzValidate (SLUICE_GEN_CORPUS=1).
func TestGenerateCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_CORPUS") == "" {
		t.Skip("set SLUICE_GEN_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzValidate")
	os.MkdirAll(dir, 0o755)
	two := append(build(t, 0, 2), build(t, 3, 2)...)
	seeds := [][]byte{build(t, 0, 1), build(t, 1, 4), build(t, 2, 2), build(t, 4, 9), two, build(t, 0, 3)[:40],
		build(t, 3, 5), mislabel(t, build(t, 0, 3), 1), mislabel(t, build(t, 0, 3), 4), bomb(t, 4, 2<<20), bomb(t, 3, 2<<20),
		bomb(t, 1, 2<<20), bomb(t, 2, 1100<<10)}
	for i, s := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644)
	}
}
