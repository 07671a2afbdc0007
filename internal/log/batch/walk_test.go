package batch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// walked is one record as a walk reports it.
type walked struct {
	delta            int32
	ts               int64
	key, value, hdrs []byte
}

func walkAll(d *Decompressor, b []byte, limit int64) ([]walked, error) {
	h, err := ParseHeader(b)
	if err != nil {
		return nil, err
	}
	var out []walked
	err = d.WalkRecords(context.Background(), &h, b, limit, func(delta int32, ts int64, key, value, hdrs []byte) error {
		out = append(out, walked{delta, ts, bytes.Clone(key), bytes.Clone(value), bytes.Clone(hdrs)})
		return nil
	})
	return out, err
}

// encodeHeaders is the encoding a walk reports headers in.
func encodeHeaders(hs []kmsg.Header) []byte {
	b := binary.AppendVarint(nil, int64(len(hs)))
	for _, h := range hs {
		b = binary.AppendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		if h.Value == nil {
			b = binary.AppendVarint(b, -1)
		} else {
			b = binary.AppendVarint(b, int64(len(h.Value)))
			b = append(b, h.Value...)
		}
	}
	return b
}

// sameAsDecoded checks that a walk of b reports exactly the records a
// whole decode gives.
func sameAsDecoded(t *testing.T, d *Decompressor, b []byte, limit int64) {
	t.Helper()
	got, err := walkAll(d, b, limit)
	if err != nil {
		t.Fatalf("walk of a valid batch: %v", err)
	}
	x, err := d.Records(context.Background(), b, limit)
	if err != nil {
		t.Fatalf("decode of a valid batch: %v", err)
	}
	defer x.Release()
	if len(got) != len(x.Records) {
		t.Fatalf("walk saw %d records, decode %d", len(got), len(x.Records))
	}
	for i := range got {
		r := &x.Records[i]
		w := got[i]
		if w.delta != r.OffsetDelta || w.ts != RecordTimestamp(&x.Header, r) || !bytes.Equal(w.key, r.Key) ||
			(w.key == nil) != (r.Key == nil) || !bytes.Equal(w.value, r.Value) || (w.value == nil) != (r.Value == nil) ||
			!bytes.Equal(w.hdrs, encodeHeaders(r.Headers)) {
			t.Fatalf("record %d: walk %+v, decode %+v", i, w, r)
		}
	}
}

func TestWalkRecordsEveryCodec(t *testing.T) {
	d := NewDecompressor(0)
	for codec := int8(0); codec <= 4; codec++ {
		b := build(t, codec, 9)
		sameAsDecoded(t, d, b, 0)
		SetLogAppendTime(b, 777)
		sameAsDecoded(t, d, b, 0)
	}
	// Null keys and values, a record larger than the stream's buffer.
	big := bytes.Repeat([]byte("x"), 3*streamBufSize)
	for codec := int8(0); codec <= 4; codec++ {
		b, err := Build(codec, 5, []kmsg.Record{{Value: []byte("a")}, {Key: []byte("k")}, {Key: []byte("b"), Value: big}, {Value: []byte("z")}})
		if err != nil {
			t.Fatal(err)
		}
		sameAsDecoded(t, d, b, 0)
	}
	if st := d.Stats(); st.InUse != 0 {
		t.Fatalf("%d budget bytes still held", st.InUse)
	}
}

func TestWalkRecordsRefuses(t *testing.T) {
	d := NewDecompressor(0)
	zeros := make([]byte, 4<<20) // compresses to almost nothing
	bomb, err := Build(4, 0, []kmsg.Record{{Value: zeros}, {Value: zeros}, {Value: zeros}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := walkAll(d, bomb, 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a batch decompressing past its limit: %v, want ErrTooLarge", err)
	}
	gz := build(t, 1, 3)
	gz[HeaderSize+12] ^= 0xff
	if _, err := walkAll(d, gz, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a gzip payload that does not decode: %v, want ErrCorrupt", err)
	}
	plain := build(t, 0, 3)
	plain[HeaderSize] = 0x7e // first record's length past the end
	if _, err := walkAll(d, plain, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("a record that does not frame: %v, want ErrCorrupt", err)
	}
	h, _ := ParseHeader(build(t, 2, 3))
	if err := WalkRecords(&h, build(t, 2, 3), func(int32, int64, []byte, []byte, []byte) error { return nil }); !errors.Is(err, ErrCorrupt) ||
		!strings.Contains(err.Error(), "snappy") {
		t.Fatalf("WalkRecords of a compressed batch: %v", err)
	}
	stop := errors.New("stop")
	n := 0
	h, _ = ParseHeader(plain)
	if err := WalkRecords(&h, build(t, 0, 5), func(int32, int64, []byte, []byte, []byte) error { n++; return stop }); err != stop || n != 1 {
		t.Fatalf("fn's error ends the walk: %v after %d records", err, n)
	}
	if st := d.Stats(); st.InUse != 0 {
		t.Fatalf("%d budget bytes still held", st.InUse)
	}
}

// FuzzWalkRecords: a walk of any bytes ends with records or an error,
// never a panic, more records than the count says, or budget still held;
// a batch Validate accepts walks to exactly what a whole decode gives.
func FuzzWalkRecords(f *testing.F) {
	for codec := int8(0); codec <= 4; codec++ {
		f.Add(build(f, codec, 3))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		const limit = 1 << 20
		d := NewDecompressor(64 << 20)
		h, err := ParseHeader(b)
		if err != nil || h.Size() > len(b) {
			return
		}
		b = b[:h.Size()]
		n := 0
		_ = d.WalkRecords(context.Background(), &h, b, limit, func(int32, int64, []byte, []byte, []byte) error {
			n++
			return nil
		})
		if n > int(max(h.RecordCount, 0)) {
			t.Fatalf("%d records walked, count says %d", n, h.RecordCount)
		}
		if st := d.Stats(); st.InUse != 0 {
			t.Fatalf("%d budget bytes still held after a walk", st.InUse)
		}
		if _, err := Validate(context.Background(), b, Limits{BeforeMaxMs: math.MaxInt64, AfterMaxMs: math.MaxInt64,
			Decompressor: d, MaxDecompressedBytes: limit}); err == nil {
			sameAsDecoded(t, d, b, limit)
		}
	})
}
