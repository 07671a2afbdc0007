package delay

import (
	"bytes"
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

// FuzzWalkRecords: a store batch read back from the log walks without
// panicking, and a well-formed one gives the records it was built from.
func FuzzWalkRecords(f *testing.F) {
	good, err := buildStore(1000, []kmsg.Record{{Key: EntryKey(Target{"t", 0}, 5), Value: AppendEntry(nil, &Entry{Due: 9})},
		{Key: EntryKey(Target{"t", 0}, 6)}})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	tb := tomb{id: entryID{&target{Target: Target{"t", 0}}, 5}, due: 9, off: 0}
	f.Add(buildStoreAs(1000, []kmsg.Record{tb.record()}, storeProducer{id: 7, epoch: 1}))
	// The store's own encoder and the log's agree.
	recs := []kmsg.Record{{Key: []byte("k"), Value: []byte("v")}, {Key: []byte("k2"),
		Headers: []kmsg.Header{{Key: tombHeader, Value: tombHeaderValue(9, 3)}}}}
	if want, err := batch.Build(0, 1000, recs); err != nil || !bytes.Equal(appendStoreBatch(nil, 1000, recs, noProducer), want) {
		f.Fatalf("appendStoreBatch differs from batch.Build (%v)", err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := batch.ParseHeader(b)
		if err != nil || h.Size() > len(b) || h.Size() < batch.HeaderSize || h.Codec() != 0 {
			return
		}
		n := 0
		_ = batch.WalkRecords(&h, b[:h.Size()], func(_ int32, _ int64, _, _, hdrs []byte) error {
			n++
			_, _, _, err := tombInfo(hdrs)
			if err != nil && !errors.Is(err, ErrFormat) {
				t.Fatalf("tombstone header error %v is not ErrFormat", err)
			}
			return nil
		})
		if n > int(max(h.RecordCount, 0)) {
			t.Fatalf("%d records walked, count says %d", n, h.RecordCount)
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
