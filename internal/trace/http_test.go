package trace

import (
	"errors"
	"net/url"
	"testing"
	"time"
)

func TestParseQuery(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	ok := func(raw string) Query {
		t.Helper()
		v, _ := url.ParseQuery(raw)
		q, err := ParseQuery(v, now)
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		return q
	}
	if q := ok("topic=t&key="); !q.HasKey || q.Key != "" || q.Partition != -1 || q.Offset != -1 || q.StartOffset != -1 {
		t.Fatalf("empty key: %+v", q)
	}
	if q := ok("topic=t&header=message-id=a=b"); q.HeaderName != "message-id" || q.HeaderValue != "a=b" {
		t.Fatalf("header: %+v", q)
	}
	if q := ok("topic=t&from=1h&to=2026-12-02T11:30:00Z"); q.From != now.Add(-time.Hour).UnixMilli() || q.To != now.Add(-30*time.Minute).UnixMilli() {
		t.Fatalf("times: %+v", q)
	}
	if q := ok("topic=t&from=1764670000000"); q.From != 1764670000000 {
		t.Fatalf("unix ms: %+v", q)
	}
	if q := ok("topic=t&partition=2&start_offset=7&limit=5"); q.Partition != 2 || q.StartOffset != 7 || q.Limit != 5 {
		t.Fatalf("browse: %+v", q)
	}
	if q := ok("topic=t&partition=0&offset=3&raw=1&raw_max=8388608"); !q.Raw || q.RawLimit != RawMaxOne {
		t.Fatalf("raw_max: %+v", q)
	}
	for _, bad := range []string{"topic=t&partition=0&offset=3&raw=1&raw_max=8388609", "topic=t&partition=0&offset=3&raw=1&raw_max=0",
		"topic=t&partition=0&offset=3&raw_max=100", "topic=t&partition=0&start_offset=3&raw=1&raw_max=100", "topic=t&partition=0&offset=3&raw=1&raw_max=x",
		"", "key=k", "topic=t", "topic=t&offset=3", "topic=t&start_offset=3", "topic=t&partition=-1&offset=1",
		"topic=t&key=k&limit=0", "topic=t&key=k&limit=100000", "topic=t&from=tomorrow", "topic=t&from=2h&to=3h", "topic=t&header=novalue",
		"topic=t&key=k&from=-5m"} {
		v, _ := url.ParseQuery(bad)
		if _, err := ParseQuery(v, now); !errors.Is(err, ErrBadQuery) {
			t.Errorf("%q: %v, want a bad query", bad, err)
		}
	}
}

func TestPreview(t *testing.T) {
	long := make([]byte, 300)
	for i := range long {
		long[i] = 'a'
	}
	if p := preview(long); len(p) != valuePreview+3 {
		t.Fatalf("long value: %d bytes", len(p))
	}
	if p := preview([]byte{0xff, 'x'}); p != "\uFFFDx" {
		t.Fatalf("invalid UTF-8: %q", p)
	}
}
