package delay

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// FuzzDueTime: any header value either parses to a due time within the
// maximum or is refused with ErrBadHeader naming the header; nothing
// panics.
func FuzzDueTime(f *testing.F) {
	for _, s := range []string{"0", "1500", "-1", "", "abc", "+5", " 5", "99999999999999999999", "7776000000", "7776000001", "1.5"} {
		f.Add(true, []byte(s))
		f.Add(false, []byte(s))
	}
	const now = int64(1_700_000_000_000)
	max := 90 * 24 * time.Hour
	f.Fuzz(func(t *testing.T, at bool, v []byte) {
		key := HeaderDelayMs
		if at {
			key = HeaderDeliverAt
		}
		due, ok, err := DueTime([]kmsg.Header{{Key: key, Value: v}}, now, max)
		if err != nil {
			if !errors.Is(err, ErrBadHeader) || !bytes.Contains([]byte(err.Error()), []byte(key)) {
				t.Fatalf("%q: error %v does not name %s", v, err, key)
			}
			return
		}
		if ok && (due <= now || due > now+max.Milliseconds()) {
			t.Fatalf("%q: due %d out of (now, now+max]", v, due)
		}
	})
}

// FuzzDueTimeRaw: any bytes as a record's encoded headers (what the
// produce path reads in place) give a due time, nothing, ErrBadHeader or
// ErrFormat, never a panic; headers that frame answer as DueTime does on
// them decoded.
func FuzzDueTimeRaw(f *testing.F) {
	enc := func(hs ...kmsg.Header) []byte {
		b := binary.AppendVarint(nil, int64(len(hs)))
		for _, h := range hs {
			b = appendBytes(appendBytes(b, []byte(h.Key)), h.Value)
		}
		return b
	}
	f.Add(enc(kmsg.Header{Key: HeaderDelayMs, Value: []byte("1500")}))
	f.Add(enc(kmsg.Header{Key: "x"}, kmsg.Header{Key: HeaderDeliverAt, Value: []byte("1700000000500")}))
	f.Add(enc(kmsg.Header{Key: HeaderDeliverAt, Value: []byte("-3")}, kmsg.Header{Key: HeaderDelayMs, Value: []byte("9")}))
	f.Add(enc())
	f.Add([]byte{2, 1})
	const now = int64(1_700_000_000_000)
	max := 90 * 24 * time.Hour
	f.Fuzz(func(t *testing.T, b []byte) {
		due, ok, err := dueTimeRaw(b, now, max)
		if err != nil {
			if !errors.Is(err, ErrFormat) && !errors.Is(err, ErrBadHeader) {
				t.Fatalf("error %v is neither ErrFormat nor ErrBadHeader", err)
			}
			if errors.Is(err, ErrFormat) {
				return
			}
		}
		// It framed: decode the headers and ask DueTime.
		var hs []kmsg.Header
		n, w := binary.Varint(b)
		r := b[w:]
		for range n {
			var k, v []byte
			k, r, _ = readBytes(r)
			v, r, _ = readBytes(r)
			hs = append(hs, kmsg.Header{Key: string(k), Value: v})
		}
		due2, ok2, err2 := DueTime(hs, now, max)
		if due != due2 || ok != ok2 || (err == nil) != (err2 == nil) {
			t.Fatalf("%x: raw %d %v %v, decoded %d %v %v", b, due, ok, err, due2, ok2, err2)
		}
	})
}

// FuzzDecodeEntry: store entry values decode or fail with ErrFormat, and
// what decodes encodes to bytes that decode to the same entry (varints may
// be written longer than needed, so not always to the same bytes).
func FuzzDecodeEntry(f *testing.F) {
	f.Add(AppendEntry(nil, &Entry{Due: 5, Timestamp: 3, Key: []byte("k"), Value: []byte("v"),
		Headers: []kmsg.Header{{Key: "sluice-delay-ms", Value: []byte("10")}}}))
	f.Add(AppendEntry(nil, &Entry{Due: 5}))
	f.Add([]byte{0, 1, 2})
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := DecodeEntry(v)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		enc := AppendEntry(nil, &e)
		e2, err := DecodeEntry(enc)
		if err != nil || !bytes.Equal(AppendEntry(nil, &e2), enc) {
			t.Fatalf("re-encoded %x does not read back: %v", enc, err)
		}
	})
}

// FuzzDecodeMarker and keys, likewise.
func FuzzDecodeMarker(f *testing.F) {
	f.Add(AppendMarker(nil, &Marker{ProducerID: ProducerIDBase, FirstSeq: 7, Entries: []MarkerEntry{{1, 2}, {3, 4}}}))
	f.Add(markerKey(Target{"t", 1}))
	f.Add(EntryKey(Target{"topic", 3}, 99))
	f.Fuzz(func(t *testing.T, v []byte) {
		if m, err := DecodeMarker(v); err == nil {
			enc := AppendMarker(nil, &m)
			if m2, err := DecodeMarker(enc); err != nil || !bytes.Equal(AppendMarker(nil, &m2), enc) {
				t.Fatalf("marker re-encoded %x does not read back: %v", enc, err)
			}
		} else if !errors.Is(err, ErrFormat) {
			t.Fatalf("error %v is not ErrFormat", err)
		}
		kind, tg, off, err := ParseKey(v)
		if err != nil {
			return
		}
		var again []byte
		if kind == kindEntry {
			again = EntryKey(tg, off)
		} else {
			again = markerKey(tg)
		}
		if !bytes.Equal(again, v) {
			t.Fatalf("key re-encoded %x, read %x", again, v)
		}
	})
}

// FuzzWalkRecords: a store batch read back from the log, compressed or
// not, walks as the store's readers walk it (scanStore: streamed under a
// decompression budget) without panicking or holding budget after, any
// error is the batch package's; a well-formed one gives the records it was
// built from.
func FuzzWalkRecords(f *testing.F) {
	good, err := buildStore(1000, []kmsg.Record{{Key: EntryKey(Target{"t", 0}, 5), Value: AppendEntry(nil, &Entry{Due: 9})},
		{Key: EntryKey(Target{"t", 0}, 6)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	tb := tomb{id: entryID{&target{Target: Target{"t", 0}}, 5}, due: 9, off: 0}
	f.Add(buildStoreAs(1000, []kmsg.Record{tb.record()}, storeProducer{id: 7, epoch: 1}))
	// Store batches as Hold writes them for compressed producer batches.
	cz := newCompressors()
	var many []kmsg.Record
	for i := range 20 {
		many = append(many, kmsg.Record{Key: EntryKey(Target{"t", 0}, int64(i)), Value: AppendEntry(nil, &Entry{Due: 9, Value: make([]byte, 100)})})
	}
	for codec := int8(1); codec <= 4; codec++ {
		b := cz.compressBatch(buildStoreAs(1000, many, noProducer), 0, codec)
		if batch.Attributes(b)&batch.AttrCodecMask != int16(codec) {
			f.Fatalf("codec %d: store batch not compressed", codec)
		}
		f.Add(b)
	}
	// The store's own encoder and the log's agree.
	recs := []kmsg.Record{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("k2"),
		Headers: []kmsg.Header{{Key: tombHeader, Value: tombHeaderValue(9, 3)}}}}
	if want, err := batch.Build(0, 1000, recs); err != nil || !bytes.Equal(appendStoreBatch(nil, 1000, recs, noProducer), want) {
		f.Fatalf("appendStoreBatch differs from batch.Build (%v)", err)
	}
	d := batch.NewDecompressor(8 << 20)
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := batch.ParseHeader(b)
		if err != nil || h.Size() > len(b) || h.Size() < batch.HeaderSize {
			return
		}
		n := 0
		err = d.WalkRecords(context.Background(), &h, b[:h.Size()], 1<<20, func(_ int32, _ int64, k, v, hdrs []byte) error {
			n++
			_, _, _, err := tombInfo(hdrs)
			if err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("tombstone header error %v is not ErrFormat", err)
			}
			if _, _, _, err := ParseKey(k); err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("key error %v is not ErrFormat", err)
			}
			if _, err := entryDue(v); err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("entry error %v is not ErrFormat", err)
			}
			return nil
		})
		if err != nil && !errors.Is(err, batch.ErrCorrupt) && !errors.Is(err, batch.ErrTooLarge) {
			t.Fatalf("walk error %v is neither ErrCorrupt nor ErrTooLarge", err)
		}
		if n > int(max(h.RecordCount, 0)) {
			t.Fatalf("%d records walked, count says %d", n, h.RecordCount)
		}
		if s := d.Stats(); s.InUse != 0 {
			t.Fatalf("%d bytes of the decompression budget held after the walk", s.InUse)
		}
	})
}

// FuzzTombInfo: a tombstone's encoded headers give its entry's due time
// and offset, nothing, or ErrFormat; what the store writes reads back.
func FuzzTombInfo(f *testing.F) {
	enc := func(hs ...kmsg.Header) []byte {
		b := binary.AppendVarint(nil, int64(len(hs)))
		for _, h := range hs {
			b = appendBytes(appendBytes(b, []byte(h.Key)), h.Value)
		}
		return b
	}
	f.Add(enc(kmsg.Header{Key: tombHeader, Value: tombHeaderValue(1_700_000_000_000, 42)}))
	f.Add(enc())
	f.Add(enc(kmsg.Header{Key: "x", Value: nil}, kmsg.Header{Key: tombHeader, Value: []byte{1, 2}}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		due, off, ok, err := tombInfo(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("error %v is not ErrFormat", err)
			}
			return
		}
		if !ok {
			return
		}
		due2, off2, ok2, err := tombInfo(enc(kmsg.Header{Key: tombHeader, Value: tombHeaderValue(due, off)}))
		if err != nil || !ok2 || due2 != due || off2 != off {
			t.Fatalf("round trip of %d/%d: %d/%d %v %v", due, off, due2, off2, ok2, err)
		}
	})
}
