package batch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// upNow is the append time up-conversion is given in tests.
const upNow = 1_750_000_000_000

// legacySet is a legacy message set of magic made by down-converting the
// batches legacyBatch builds: what an old producer sends.
func legacySet(t testing.TB, codec, magic int8, n int) []byte {
	t.Helper()
	set, err := NewDecompressor(0).DownConvert(context.Background(), nil, legacyBatch(t, codec, 0, n, false), magic, 1<<30, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	return set
}

// checkUpConverted compares the batch UpConvert made of set with the
// messages in set.
func checkUpConverted(t testing.TB, set, b []byte) {
	t.Helper()
	want := parseLegacySet(t, set, false, false)
	if err := func() error { _, err := Validate(context.Background(), b, noLimits); return err }(); err != nil {
		t.Fatalf("up-converted batch does not validate: %v", err)
	}
	x, err := NewDecompressor(0).Records(context.Background(), b, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Records) != len(want) {
		t.Fatalf("%d records, want %d", len(x.Records), len(want))
	}
	if x.Header.BaseOffset != 0 || x.Header.ProducerID != -1 {
		t.Fatalf("header %+v", x.Header)
	}
	for i, r := range x.Records {
		w := want[i]
		ts := x.Header.FirstTimestamp + r.TimestampDelta64
		if x.Header.Attributes&AttrLogAppendTime != 0 {
			ts = x.Header.MaxTimestamp
		}
		if w.magic == 0 {
			w.ts = upNow // no timestamp: the append time
		}
		if ts != w.ts || int(r.OffsetDelta) != i ||
			!sameBytes(r.Key, w.key) || !sameBytes(r.Value, w.value) || len(r.Headers) != 0 {
			t.Fatalf("record %d: ts %d key %q value %q, want ts %d key %q value %q", i, ts, r.Key, r.Value, w.ts, w.key, w.value)
		}
	}
}

func TestUpConvert(t *testing.T) {
	for codec := int8(0); codec <= 3; codec++ {
		for _, magic := range []int8{0, 1} {
			t.Run(fmt.Sprintf("%s/magic%d", codecName(codec), magic), func(t *testing.T) {
				// Two batches' worth: two wrappers when compressed.
				set := append(legacySet(t, codec, magic, 7), legacySet(t, codec, magic, 30)...)
				if !IsLegacy(set) {
					t.Fatal("IsLegacy: false")
				}
				d := NewDecompressor(0)
				b, err := d.UpConvert(context.Background(), set, 1<<20, upNow)
				if err != nil {
					t.Fatal(err)
				}
				if got := int8(Attributes(b) & AttrCodecMask); got != codec {
					t.Errorf("batch codec %d, want %d", got, codec)
				}
				checkUpConverted(t, set, b)
				if d.Stats().InUse != 0 {
					t.Fatal("budget still held")
				}
			})
		}
	}
	if IsLegacy(legacyBatch(t, 0, 0, 1, false)) {
		t.Error("IsLegacy of a record batch")
	}
}

// TestUpConvertOldLZ4: magic 0 lz4 wrappers with the header checksum Kafka
// before 0.10 wrote (over the magic number too) are read.
func TestUpConvertOldLZ4(t *testing.T) {
	set := legacySet(t, 3, 0, 5)
	orig := bytes.Clone(set)
	// The wrapper's value starts after offset, size, crc, magic, attrs,
	// key (null) and the value's length.
	v := set[12+4+1+1+4+4:]
	desc := 2
	if v[4]&0x08 != 0 {
		desc += 8
	}
	broken := byte(xxh32Short(v[:4+desc]) >> 8)
	if broken == v[4+desc] {
		t.Skip("the broken checksum happens to equal the right one")
	}
	v[4+desc] = broken
	binary.BigEndian.PutUint32(set[12:], crcIEEE(set[16:]))
	b, err := NewDecompressor(0).UpConvert(context.Background(), set, 1<<20, upNow)
	if err != nil {
		t.Fatalf("magic 0 lz4 with Kafka 0.8's header checksum: %v", err)
	}
	checkUpConverted(t, orig, b)
}

func TestUpConvertRefusals(t *testing.T) {
	ctx := context.Background()
	d := NewDecompressor(0)
	good := legacySet(t, 0, 1, 3)
	flip := func(i int) []byte { b := bytes.Clone(good); b[i] ^= 0xff; return b }
	nested := legacySet(t, 1, 1, 2)
	mixed := append(legacySet(t, 0, 0, 1), legacySet(t, 0, 1, 1)...)
	for _, c := range []struct {
		name string
		set  []byte
		want error
	}{
		{"bad crc", flip(20), ErrCorrupt},
		{"partial", good[:len(good)-3], ErrCorrupt},
		{"huge size", func() []byte { b := bytes.Clone(good); binary.BigEndian.PutUint32(b[8:], 1<<30); return b }(), ErrCorrupt},
		{"mixed magics", mixed, ErrCorrupt},
		{"magic 2 inside", func() []byte {
			b := bytes.Clone(good)
			b[16] = 2
			binary.BigEndian.PutUint32(b[12:], crcIEEE(b[16:12+int(binary.BigEndian.Uint32(b[8:]))]))
			return b
		}(), ErrCorrupt},
		{"corrupt gzip", func() []byte {
			b := bytes.Clone(nested)
			b[len(b)-5] ^= 0xff
			binary.BigEndian.PutUint32(b[12:], crcIEEE(b[16:]))
			return b
		}(), ErrCorrupt},
		{"too large decompressed", legacySet(t, 1, 1, 40), ErrTooLarge},
	} {
		limit := int64(1 << 20)
		if c.want == ErrTooLarge {
			limit = 100
		}
		if _, err := d.UpConvert(ctx, c.set, limit, upNow); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	if d.Stats().InUse != 0 {
		t.Fatal("budget still held")
	}
}

func crcIEEE(b []byte) uint32 { return crc32.ChecksumIEEE(b) }

func FuzzUpConvert(f *testing.F) {
	for codec := int8(0); codec <= 3; codec++ {
		f.Add(legacySet(f, codec, codec%2, 4))
	}
	f.Fuzz(func(t *testing.T, set []byte) {
		d := NewDecompressor(64 << 20)
		b, err := d.UpConvert(context.Background(), set, 1<<20, upNow)
		if st := d.Stats(); st.InUse != 0 {
			t.Fatalf("%d budget bytes still held", st.InUse)
		}
		if err != nil {
			return
		}
		// What is accepted is a valid batch of the set's messages.
		checkUpConverted(t, set, b)
	})
}

// TestGenerateUpConvertCorpus rewrites testdata/fuzz/FuzzUpConvert
// (SLUICE_GEN_CORPUS=1).
func TestGenerateUpConvertCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_CORPUS") == "" {
		t.Skip("set SLUICE_GEN_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzUpConvert")
	os.MkdirAll(dir, 0o755)
	seeds := [][]byte{legacySet(t, 0, 0, 3), legacySet(t, 0, 1, 2), legacySet(t, 1, 0, 4), legacySet(t, 1, 1, 4),
		legacySet(t, 2, 1, 5), legacySet(t, 3, 0, 3), legacySet(t, 3, 1, 3), append(legacySet(t, 0, 1, 1), legacySet(t, 2, 1, 2)...),
		legacySet(t, 0, 1, 3)[:30], legacySet(t, 1, 1, 2)[:50]}
	for i, s := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644)
	}
}
