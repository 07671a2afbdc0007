package cli

import (
	"io"
	"strconv"
	"strings"
	"testing"
)

func TestParseReferenceAndType(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want string // name subject version, or "" for an error
	}{
		{"acme/a.proto=address:3", "acme/a.proto address 3"},
		{"t.User=ns:users-value:latest", "t.User ns:users-value -1"},
		{"x=s:-1", "x s -1"},
		{"x=s", ""}, {"=s:1", ""}, {"x=s:0", ""}, {"x=:1", ""}, {"x=s:", ""}, {"x", ""},
	} {
		r, err := parseReference(tt.in)
		got := ""
		if err == nil {
			got = strings.Join([]string{r.Name, r.Subject, strconv.Itoa(r.Version)}, " ")
		}
		if got != tt.want {
			t.Errorf("parseReference(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	for _, tt := range []struct{ flag, file, want string }{
		{"", "a.avsc", "AVRO"}, {"", "a.proto", "PROTOBUF"}, {"", "a.JSON", "JSON"}, {"", "-", "AVRO"},
		{"json", "a.avsc", "JSON"}, {"xml", "a.avsc", ""},
	} {
		got, err := schemaType(tt.flag, tt.file)
		if got != tt.want || (err != nil) != (tt.want == "") {
			t.Errorf("schemaType(%q, %q) = %q, %v; want %q", tt.flag, tt.file, got, err, tt.want)
		}
	}
}

// TestCappedBody: an answer body is read up to the cap, and one byte past
// it is an error, not a truncated answer.
func TestCappedBody(t *testing.T) {
	for _, tt := range []struct {
		size    int
		wantErr bool
	}{{0, false}, {10, false}, {11, true}, {5000, true}} {
		b := &cappedBody{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("x", tt.size))), left: 10, max: 10}
		got, err := io.ReadAll(b)
		if (err != nil) != tt.wantErr || (!tt.wantErr && len(got) != tt.size) || len(got) > 11 {
			t.Errorf("%d bytes: read %d, %v", tt.size, len(got), err)
		}
	}
}
