package delay

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
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
