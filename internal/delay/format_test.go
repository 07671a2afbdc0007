package delay

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

func TestDueTime(t *testing.T) {
	const now = int64(1_000_000)
	max := 90 * 24 * time.Hour
	for _, tc := range []struct {
		name    string
		hs      []kmsg.Header
		due     int64
		ok      bool
		errName string
	}{
		{"none", nil, 0, false, ""},
		{"delay", []kmsg.Header{{Key: HeaderDelayMs, Value: []byte("1500")}}, now + 1500, true, ""},
		{"zero delay", []kmsg.Header{{Key: HeaderDelayMs, Value: []byte("0")}}, now, false, ""},
		{"at", []kmsg.Header{{Key: HeaderDeliverAt, Value: []byte("1000500")}}, 1000500, true, ""},
		{"at past", []kmsg.Header{{Key: HeaderDeliverAt, Value: []byte("5")}}, 5, false, ""},
		{"at wins", []kmsg.Header{{Key: HeaderDelayMs, Value: []byte("9")}, {Key: HeaderDeliverAt, Value: []byte("1000500")}}, 1000500, true, ""},
		{"negative", []kmsg.Header{{Key: HeaderDelayMs, Value: []byte("-1")}}, 0, false, HeaderDelayMs},
		{"text", []kmsg.Header{{Key: HeaderDeliverAt, Value: []byte("soon")}}, 0, false, HeaderDeliverAt},
		{"too far", []kmsg.Header{{Key: HeaderDelayMs, Value: []byte("7776000001")}}, 0, false, HeaderDelayMs},
		{"90 days", []kmsg.Header{{Key: HeaderDelayMs, Value: []byte("7776000000")}}, now + 7776000000, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			due, ok, err := DueTime(tc.hs, now, max)
			if tc.errName != "" {
				if err == nil || !strings.Contains(err.Error(), tc.errName) {
					t.Fatalf("err %v, want one naming %s", err, tc.errName)
				}
				return
			}
			if err != nil || due != tc.due && tc.ok || ok != tc.ok {
				t.Fatalf("got %d %v %v, want %d %v", due, ok, err, tc.due, tc.ok)
			}
		})
	}
}

func TestStoreRecordsRoundTrip(t *testing.T) {
	e := Entry{Due: 123, Timestamp: 45, Key: nil, Value: []byte{}, Headers: []kmsg.Header{{Key: "a", Value: nil}, {Key: "b", Value: []byte("x")}}}
	got, err := DecodeEntry(AppendEntry(nil, &e))
	if err != nil || got.Due != 123 || got.Timestamp != 45 || got.Key != nil || got.Value == nil || len(got.Headers) != 2 ||
		got.Headers[0].Value != nil || string(got.Headers[1].Value) != "x" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	kind, tg, off, err := ParseKey(EntryKey(Target{"orders", 7}, 42))
	if err != nil || kind != kindEntry || tg != (Target{"orders", 7}) || off != 42 {
		t.Fatalf("entry key: %c %v %d %v", kind, tg, off, err)
	}
	m := Marker{ProducerID: ProducerIDBase + 3, Epoch: 0, FirstSeq: 99, Entries: []MarkerEntry{{10, 20}}}
	gm, err := DecodeMarker(AppendMarker(nil, &m))
	if err != nil || gm.ProducerID != m.ProducerID || gm.FirstSeq != 99 || len(gm.Entries) != 1 || gm.Entries[0] != m.Entries[0] {
		t.Fatalf("marker: %+v %v", gm, err)
	}
}

// TestEntryFromWalk checks that what the produce path encodes from a
// record walked in place (appendEntryRaw, dueTimeRaw) is what it encoded
// from the decoded record (AppendEntry, DueTime), byte for byte, for
// records of every shape: null and empty keys and values, no headers,
// null header values, repeated and unrelated headers, bad values.
func TestEntryFromWalk(t *testing.T) {
	const now = int64(1_700_000_000_000)
	max := 90 * 24 * time.Hour
	hdr := func(k, v string) kmsg.Header { return kmsg.Header{Key: k, Value: []byte(v)} }
	recs := []kmsg.Record{
		{Key: []byte("k"), Value: []byte("v"), Headers: []kmsg.Header{hdr(HeaderDelayMs, "1500")}},
		{Value: []byte("no key"), Headers: []kmsg.Header{hdr("a", ""), hdr(HeaderDeliverAt, "1700000009999"), {Key: "n"}}},
		{Key: []byte{}, Headers: []kmsg.Header{hdr(HeaderDelayMs, "9"), hdr(HeaderDelayMs, "10"), hdr(HeaderDeliverAt, "5")}},
		{Key: []byte("plain")},
		{Value: make([]byte, 300), Headers: []kmsg.Header{{Key: HeaderDelayMs}}},
		{Value: []byte("x"), Headers: []kmsg.Header{hdr(HeaderDeliverAt, "soon"), hdr("sluice-message-id", "m-1")}},
		{Value: []byte("y"), Headers: []kmsg.Header{hdr(HeaderDelayMs, "99999999999")}},
	}
	b, err := batch.Build(0, now-5, slices.Clone(recs))
	if err != nil {
		t.Fatal(err)
	}
	h, err := batch.ParseHeader(b)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	err = batch.WalkRecords(&h, b, func(delta int32, ts int64, key, value, hdrs []byte) error {
		r := &recs[i]
		i++
		due, ok, derr := DueTime(r.Headers, now, max)
		due2, ok2, derr2 := dueTimeRaw(hdrs, now, max)
		if due != due2 || ok != ok2 || (derr == nil) != (derr2 == nil) || derr != nil && derr.Error() != derr2.Error() {
			t.Errorf("record %d: DueTime %d %v %v, from the walk %d %v %v", delta, due, ok, derr, due2, ok2, derr2)
		}
		e := Entry{Due: 42, Timestamp: now - 5, Key: r.Key, Value: r.Value, Headers: r.Headers}
		want := AppendEntry(nil, &e)
		got := appendEntryRaw(nil, 42, ts, key, value, hdrs)
		if !bytes.Equal(got, want) || entryLenRaw(key, value, hdrs) != len(want) || entryLen(&e) != len(want) {
			t.Errorf("record %d: entry %x from the walk (length %d), want %x", delta, got, entryLenRaw(key, value, hdrs), want)
		}
		return nil
	})
	if err != nil || i != len(recs) {
		t.Fatalf("walked %d of %d: %v", i, len(recs), err)
	}
}
