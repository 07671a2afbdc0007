package cli

import (
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func testRecord() *kgo.Record {
	return &kgo.Record{
		Topic:     "t",
		Partition: 3,
		Offset:    42,
		Timestamp: time.UnixMilli(1767366245000),
		Key:       []byte("k"),
		Value:     []byte(`say "<hi>" & bye`),
		Headers:   []kgo.RecordHeader{{Key: "a", Value: []byte("1")}, {Key: "b", Value: nil}, {Key: "a", Value: []byte("2")}},
	}
}

func TestFormat(t *testing.T) {
	t.Parallel()
	r := testRecord()
	for _, tc := range []struct {
		format, want string
	}{
		{DefaultFormat, "say \"<hi>\" & bye\n"},
		{`%s`, `say "<hi>" & bye`},
		{`%t/%p@%o %T`, "t/3@42 1767366245000"},
		{`[%k] %K %S`, "[k] 1 16"},
		{`%h`, "a=1,b=,a=2"},
		{`100%% \\ \t\r\n`, "100% \\ \t\r\n"},
		{`plain`, "plain"},
		{``, ""},
	} {
		f, err := parseFormat(tc.format)
		if err != nil {
			t.Fatalf("parseFormat(%q): %v", tc.format, err)
		}
		if got := string(f.appendRecord([]byte("prefix:"), r)); got != "prefix:"+tc.want {
			t.Errorf("format %q: got %q, want %q", tc.format, got, "prefix:"+tc.want)
		}
	}

	null := &kgo.Record{Topic: "t"}
	f, _ := parseFormat(`[%k][%v][%K][%S][%h]`)
	if got := string(f.appendRecord(nil, null)); got != "[][][-1][-1][]" {
		t.Errorf("null key/value: got %q", got)
	}

	for _, bad := range []string{`%`, `abc\`, `%x`, `\q`, `%v%`} {
		if _, err := parseFormat(bad); !errors.Is(err, ErrBadFlag) {
			t.Errorf("parseFormat(%q) = %v, want ErrBadFlag", bad, err)
		}
	}
}

func TestJSONFormat(t *testing.T) {
	t.Parallel()
	got := string(jsonFormat{}.appendRecord(nil, testRecord()))
	want := `{"topic":"t","partition":3,"offset":42,"timestamp":1767366245000,"key":"k","value":"say \"<hi>\" & bye","headers":{"a":"2","b":""}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	got = string(jsonFormat{}.appendRecord(nil, &kgo.Record{Topic: "t", Timestamp: time.UnixMilli(5), Value: []byte{0xff}}))
	want = `{"topic":"t","partition":0,"offset":0,"timestamp":5,"key":null,"value":"\ufffd","headers":{}}` + "\n"
	if got != want {
		t.Fatalf("null key, invalid UTF-8:\n got %s\nwant %s", got, want)
	}
}

func TestParseStart(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		offset, at string
		want       startSpec
	}{
		{offset: "earliest", want: startSpec{kind: startEarliest}},
		{offset: "beginning", want: startSpec{kind: startEarliest}},
		{offset: "latest", want: startSpec{kind: startLatest}},
		{offset: "0", want: startSpec{kind: startAbsolute, n: 0}},
		{offset: "17", want: startSpec{kind: startAbsolute, n: 17}},
		{offset: "-5", want: startSpec{kind: startLastN, n: 5}},
		{at: "2026-01-02T15:04:05Z", want: startSpec{kind: startTime, n: 1767366245000}},
		{at: "2026-01-02T15:04:05.25Z", want: startSpec{kind: startTime, n: 1767366245250}},
		{at: "1767366245000", want: startSpec{kind: startTime, n: 1767366245000}},
		{at: "-90s", want: startSpec{kind: startTime, n: now.Add(-90 * time.Second).UnixMilli()}},
		{at: "-1000000h", want: startSpec{kind: startTime, n: 0}},
	} {
		var (
			got startSpec
			err error
		)
		if tc.at != "" {
			got, err = parseTime(tc.at, now)
		} else {
			got, err = parseOffset(tc.offset)
		}
		if err != nil || got != tc.want {
			t.Errorf("offset %q time %q: got %+v, %v; want %+v", tc.offset, tc.at, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "first", "1.5", "0x10"} {
		if _, err := parseOffset(bad); !errors.Is(err, ErrBadFlag) {
			t.Errorf("parseOffset(%q) = %v, want ErrBadFlag", bad, err)
		}
	}
	for _, bad := range []string{"", "yesterday", "2026-01-02", "+1h", "-1", "-x"} {
		if _, err := parseTime(bad, now); !errors.Is(err, ErrBadFlag) {
			t.Errorf("parseTime(%q) = %v, want ErrBadFlag", bad, err)
		}
	}
}

func FuzzFormat(f *testing.F) {
	for _, s := range []string{DefaultFormat, `%t %p %o %T %k %v %h %K %S %%`, `\`, `%`, `\\n`} {
		f.Add(s)
	}
	r := testRecord()
	f.Fuzz(func(t *testing.T, s string) {
		tf, err := parseFormat(s)
		if err != nil {
			return
		}
		tf.appendRecord(nil, r)
	})
}
