package batch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// legacyMsg is one message read back from a legacy message set, with its
// absolute offset (inner messages resolved).
type legacyMsg struct {
	offset     int64
	magic      int8
	attrs      int8
	ts         int64
	key, value []byte
}

// parseLegacy decodes a message set independently of the writer: every
// message's CRC and size are checked, wrappers are decompressed with the
// broker's own readers and their inner offsets resolved the way clients do
// (magic 1: wrapper offset minus the last inner offset plus the inner one).
// A partial message at the end is ignored, as clients ignore it.
func parseLegacy(t testing.TB, set []byte, inner bool) []legacyMsg {
	t.Helper()
	return parseLegacySet(t, set, inner, true)
}

// parseLegacySet is parseLegacy; with strict, a wrapper's offset must be
// its last inner message's (what the broker writes; producers' offsets
// are ignored).
func parseLegacySet(t testing.TB, set []byte, inner, strict bool) []legacyMsg {
	t.Helper()
	var out []legacyMsg
	for len(set) >= legacyLogOverhead {
		off := int64(binary.BigEndian.Uint64(set))
		size := int(binary.BigEndian.Uint32(set[8:]))
		if size > len(set)-legacyLogOverhead {
			break
		}
		m := set[legacyLogOverhead : legacyLogOverhead+size]
		set = set[legacyLogOverhead+size:]
		if len(m) < legacyHeader0 {
			t.Fatalf("message of %d bytes", len(m))
		}
		if crc := binary.BigEndian.Uint32(m); crc != crc32.ChecksumIEEE(m[4:]) {
			t.Fatalf("message at offset %d: bad crc", off)
		}
		lm := legacyMsg{offset: off, magic: int8(m[4]), attrs: int8(m[5]), ts: -1}
		rest := m[legacyHeader0:]
		if lm.magic == 1 {
			lm.ts = int64(binary.BigEndian.Uint64(rest))
			rest = rest[8:]
		}
		lm.key, rest = readLegacyBytes(t, rest)
		lm.value, rest = readLegacyBytes(t, rest)
		if len(rest) != 0 {
			t.Fatalf("message at offset %d: %d bytes past its value", off, len(rest))
		}
		codec := lm.attrs & 0x07
		if codec == 0 {
			out = append(out, lm)
			continue
		}
		if inner {
			t.Fatalf("compressed message inside a wrapper")
		}
		src := lm.value
		if codec == 3 && lm.magic == 0 {
			src = fixLZ4HeaderChecksum(src) // as magic 0 readers do
		}
		raw := decompressLegacy(t, int8(codec), src)
		ins := parseLegacySet(t, raw, true, strict)
		if len(ins) == 0 {
			t.Fatalf("empty wrapper at offset %d", off)
		}
		for i := range ins {
			if ins[i].magic != lm.magic {
				t.Fatalf("inner magic %d in a magic %d wrapper", ins[i].magic, lm.magic)
			}
			if lm.magic == 1 {
				ins[i].offset = off - ins[len(ins)-1].offset + ins[i].offset
				if lm.attrs&legacyTimestampType != 0 {
					ins[i].ts = lm.ts // log-append time: the wrapper's
				}
			}
		}
		if last := ins[len(ins)-1].offset; strict && last != off {
			t.Fatalf("wrapper offset %d, last inner offset %d", off, last)
		}
		out = append(out, ins...)
	}
	return out
}

func readLegacyBytes(t testing.TB, b []byte) ([]byte, []byte) {
	t.Helper()
	if len(b) < 4 {
		t.Fatalf("truncated bytes length")
	}
	n := int32(binary.BigEndian.Uint32(b))
	b = b[4:]
	if n < 0 {
		return nil, b
	}
	if int(n) > len(b) {
		t.Fatalf("bytes of %d, %d left", n, len(b))
	}
	return b[:n], b[n:]
}

func decompressLegacy(t testing.TB, codec int8, src []byte) []byte {
	t.Helper()
	d := NewDecompressor(0)
	s, err := d.open(context.Background(), codec, src, 64<<20, 0)
	if err != nil {
		t.Fatalf("wrapper (%s) does not open: %v", codecName(codec), err)
	}
	defer d.done(s)
	raw, err := io.ReadAll(s.r)
	if err != nil {
		t.Fatalf("wrapper (%s) does not decompress: %v", codecName(codec), err)
	}
	return raw
}

// checkConverted compares a converted set with the records of the batches
// it came from.
func checkConverted(t testing.TB, magic int8, batches [][]byte, set []byte) {
	t.Helper()
	var want []legacyMsg
	for _, b := range batches {
		if h, err := ParseHeader(b); err == nil && h.IsControl() {
			continue
		}
		x, err := NewDecompressor(0).Records(context.Background(), b, 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range x.Records {
			ts := x.Header.FirstTimestamp + r.TimestampDelta64
			if x.Header.Attributes&AttrLogAppendTime != 0 {
				ts = x.Header.MaxTimestamp
			}
			if magic == 0 {
				ts = -1
			}
			want = append(want, legacyMsg{offset: x.Header.BaseOffset + int64(r.OffsetDelta), magic: magic, ts: ts, key: r.Key, value: r.Value})
		}
	}
	got := parseLegacy(t, set, false)
	if len(got) != len(want) {
		t.Fatalf("magic %d: %d messages, want %d", magic, len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.offset != w.offset || g.magic != w.magic || g.ts != w.ts || !sameBytes(g.key, w.key) || !sameBytes(g.value, w.value) {
			t.Fatalf("magic %d message %d: got off=%d magic=%d ts=%d key=%q value=%q, want off=%d magic=%d ts=%d key=%q value=%q",
				magic, i, g.offset, g.magic, g.ts, g.key, g.value, w.offset, w.magic, w.ts, w.key, w.value)
		}
	}
}

// sameBytes compares two byte strings, null differing from empty.
func sameBytes(a, b []byte) bool { return (a == nil) == (b == nil) && bytes.Equal(a, b) }

// legacyBatch builds a batch at base with n records, some with null keys
// or values and headers (which are dropped).
func legacyBatch(t testing.TB, codec int8, base int64, n int, logAppend bool) []byte {
	recs := make([]kmsg.Record, n)
	for i := range recs {
		if i%3 != 1 {
			recs[i].Key = fmt.Appendf(nil, "k%d", base+int64(i))
		}
		if i%4 != 2 {
			recs[i].Value = bytes.Repeat(fmt.Appendf(nil, "value-%d;", base+int64(i)), 1+i%5)
		}
		recs[i].TimestampDelta64 = int64(i * 7)
		recs[i].Headers = []kmsg.Header{{Key: "h", Value: []byte("v")}}
	}
	b, err := Build(codec, 1_700_000_000_000, recs)
	if err != nil {
		t.Fatal(err)
	}
	SetBaseOffset(b, base)
	if logAppend {
		SetLogAppendTime(b, 1_800_000_000_000)
	}
	return b
}

func TestDownConvert(t *testing.T) {
	ctx := context.Background()
	for codec := int8(0); codec <= 3; codec++ {
		for _, magic := range []int8{0, 1} {
			for _, logAppend := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/magic%d/logappend=%v", codecName(codec), magic, logAppend), func(t *testing.T) {
					batches := [][]byte{legacyBatch(t, codec, 100, 7, logAppend), legacyBatch(t, codec, 107, 1, logAppend), legacyBatch(t, codec, 108, 40, logAppend)}
					src := bytes.Join(batches, nil)
					d := NewDecompressor(0)
					set, err := d.DownConvert(ctx, []byte("prefix"), src, magic, 1<<20, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					if string(set[:6]) != "prefix" {
						t.Fatal("dst was not appended to")
					}
					checkConverted(t, magic, batches, set[6:])
					if d.Stats().InUse != 0 {
						t.Fatal("budget still held")
					}
					// A partial batch at the end is left out.
					part, err := d.DownConvert(ctx, nil, src[:len(src)-5], magic, 1<<20, 1<<20)
					if err != nil {
						t.Fatal(err)
					}
					checkConverted(t, magic, batches[:2], part)
				})
			}
		}
	}
}

func TestDownConvertLimitsAndRefusals(t *testing.T) {
	ctx := context.Background()
	d := NewDecompressor(0)
	a, b := legacyBatch(t, 0, 0, 10, false), legacyBatch(t, 1, 10, 10, false)
	one, err := d.DownConvert(ctx, nil, append(append([]byte{}, a...), b...), 1, 1, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	// Past the limit after the first batch: the first stays whole (KIP-74).
	checkConverted(t, 1, [][]byte{a}, one)

	// zstd: refused first, left out after something was converted.
	z := legacyBatch(t, 4, 20, 3, false)
	if _, err := d.DownConvert(ctx, nil, z, 1, 1<<20, 1<<20); !errors.Is(err, ErrLegacyCodec) {
		t.Fatalf("zstd first: %v, want ErrLegacyCodec", err)
	}
	set, err := d.DownConvert(ctx, nil, append(append([]byte{}, a...), z...), 0, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	checkConverted(t, 0, [][]byte{a}, set)

	// Control batches are left out.
	ctl := legacyBatch(t, 0, 30, 1, false)
	binary.BigEndian.PutUint16(ctl[OffAttributes:], uint16(AttrControl))
	binary.BigEndian.PutUint32(ctl[OffCRC:], ComputeCRC(ctl))
	set, err = d.DownConvert(ctx, nil, append(append([]byte{}, ctl...), a...), 1, 1<<20, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	checkConverted(t, 1, [][]byte{a}, set)
	// DataBytes counts what a legacy reader gets: not the control batch,
	// not a partial batch at the end.
	if n := DataBytes(append(append(append([]byte{}, ctl...), a...), b[:20]...)); n != len(a) {
		t.Errorf("DataBytes: %d, want %d", n, len(a))
	}

	// Bad magic asked for, corrupt batch.
	if _, err := d.DownConvert(ctx, nil, a, 2, 1<<20, 1<<20); !errors.Is(err, ErrUnsupportedMagic) {
		t.Fatalf("magic 2: %v", err)
	}
	bad := append([]byte{}, b...)
	bad[len(bad)-3] ^= 0xff // inside the gzip payload
	if _, err := d.DownConvert(ctx, nil, bad, 1, 1<<20, 1<<20); err == nil {
		t.Fatal("a corrupt gzip batch converted")
	}
	if d.Stats().InUse != 0 {
		t.Fatal("budget still held")
	}
}

func FuzzDownConvert(f *testing.F) {
	for codec := int8(0); codec <= 4; codec++ {
		f.Add(legacyBatch(f, codec, 5, 3, codec == 2), int8(codec%2))
	}
	f.Fuzz(func(t *testing.T, src []byte, magic int8) {
		d := NewDecompressor(64 << 20)
		set, err := d.DownConvert(context.Background(), nil, src, magic, 1<<20, 1<<20)
		if st := d.Stats(); st.InUse != 0 {
			t.Fatalf("%d budget bytes still held", st.InUse)
		}
		if err != nil {
			if len(set) != 0 {
				t.Fatalf("an error (%v) with %d bytes converted", err, len(set))
			}
			return
		}
		// What was converted must read back as the records of the whole
		// batches it came from.
		var batches [][]byte
		for rest := src; len(rest) >= HeaderSize; {
			h, err := ParseHeader(rest)
			if err != nil || h.Magic != 2 || h.Size() < HeaderSize || h.Size() > len(rest) {
				break
			}
			b := rest[:h.Size()]
			rest = rest[h.Size():]
			if !h.IsControl() {
				if h.Codec() == 4 {
					break
				}
				if _, err := d.Records(context.Background(), b, 1<<20); err != nil {
					break
				}
			}
			batches = append(batches, b)
		}
		checkConverted(t, magic, batches, set)
	})
}

// TestGenerateLegacyCorpus rewrites testdata/fuzz/FuzzDownConvert
// (SLUICE_GEN_CORPUS=1).
func TestGenerateLegacyCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_CORPUS") == "" {
		t.Skip("set SLUICE_GEN_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDownConvert")
	os.MkdirAll(dir, 0o755)
	type seed struct {
		b     []byte
		magic int8
	}
	two := append(legacyBatch(t, 0, 0, 2, false), legacyBatch(t, 3, 2, 4, true)...)
	seeds := []seed{{legacyBatch(t, 0, 0, 3, false), 0}, {legacyBatch(t, 1, 9, 5, false), 1}, {legacyBatch(t, 2, 0, 4, true), 1},
		{legacyBatch(t, 3, 0, 6, false), 0}, {legacyBatch(t, 4, 0, 2, false), 1}, {two, 1}, {two[:len(two)-4], 0},
		{legacyBatch(t, 1, 0, 3, false)[:70], 1}, {bomb(t, 1, 2<<20), 1}, {mislabel(t, legacyBatch(t, 0, 0, 3, false), 2), 0}}
	for i, s := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s.b)) + ")\nint8(" + strconv.Itoa(int(s.magic)) + ")\n"
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644)
	}
}
