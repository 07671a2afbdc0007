package batch

import (
	"encoding/binary"
	"testing"
)

// FuzzFastRecord: whatever the bytes, fastRecord never reads past them,
// and a record it accepts is one walkRecord accepts, with the same
// timestamp delta, key nullness and end.
func FuzzFastRecord(f *testing.F) {
	rec := func(fields ...int64) []byte {
		var body []byte
		body = append(body, 0) // attributes
		for _, v := range fields {
			body = binary.AppendVarint(body, v)
		}
		return append(binary.AppendVarint(nil, int64(len(body))), body...)
	}
	f.Add(rec(0, 0, -1, 0, 0))
	f.Add(append(rec(5, 1, 3), 'k', 'e', 'y', 2, 'v', 0))
	f.Add([]byte{0x02, 0x00, 0x00})
	f.Add([]byte{0x80, 0x01})
	f.Add(rec(1000, 4000, -1, 100))
	f.Fuzz(func(t *testing.T, p []byte) {
		next, ts, keyNull, ok := fastRecord(p, 0)
		if !ok {
			return
		}
		l, n := binary.Varint(p)
		if n <= 0 || l < 0 || l > int64(len(p)-n) {
			t.Fatalf("fastRecord took a record whose length %d does not frame", l)
		}
		wts, wnull, delay, err := walkRecord(p[n : n+int(l)])
		if err != nil || delay || wts != ts || wnull != keyNull || next != n+int(l) {
			t.Fatalf("fastRecord (%d, %d, %v) and walkRecord (%d, %v, %v, %v, end %d) disagree",
				next, ts, keyNull, wts, wnull, delay, err, n+int(l))
		}
	})
}
