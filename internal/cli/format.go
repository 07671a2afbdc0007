package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultFormat prints each record's value on its own line.
const DefaultFormat = `%v\n`

// formatHelp is shown in "consume --help".
const formatHelp = `Format placeholders (kcat-like):
  %t topic        %p partition     %o offset       %T timestamp (unix ms)
  %k key          %v value (%s)    %h headers as k1=v1,k2=v2
  %K key length   %S value length  %% a literal %
Escapes: \n newline, \t tab, \r carriage return, \\ backslash.
A null key or value prints as nothing; %K and %S print -1 for null.`

// recordFormatter appends one record's rendering to buf.
type recordFormatter interface {
	appendRecord(buf []byte, r *kgo.Record) []byte
}

// formatPart is a literal (verb == 0) or a placeholder.
type formatPart struct {
	lit  string
	verb byte
}

type textFormat []formatPart

// parseFormat compiles a --format string once, so typos fail before any
// record is fetched rather than printing half-formatted output.
func parseFormat(s string) (textFormat, error) {
	var (
		parts textFormat
		lit   strings.Builder
	)
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, formatPart{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '\\' {
			lit.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return nil, fmt.Errorf("%w: --format %q: trailing %q (write %s for a literal one)",
				ErrBadFlag, s, string(c), map[byte]string{'%': "%%", '\\': `\\`}[c])
		}
		i++
		n := s[i]
		if c == '\\' {
			switch n {
			case 'n':
				lit.WriteByte('\n')
			case 't':
				lit.WriteByte('\t')
			case 'r':
				lit.WriteByte('\r')
			case '\\':
				lit.WriteByte('\\')
			default:
				return nil, fmt.Errorf(`%w: --format %q: unknown escape \%c (known: \n \t \r \\)`, ErrBadFlag, s, n)
			}
			continue
		}
		switch n {
		case '%':
			lit.WriteByte('%')
		case 't', 'p', 'o', 'T', 'k', 'v', 's', 'h', 'K', 'S':
			flush()
			parts = append(parts, formatPart{verb: n})
		default:
			return nil, fmt.Errorf("%w: --format %q: unknown placeholder %%%c (known: %%t %%p %%o %%T %%k %%v %%h %%K %%S %%%%)",
				ErrBadFlag, s, n)
		}
	}
	flush()
	return parts, nil
}

func (f textFormat) appendRecord(buf []byte, r *kgo.Record) []byte {
	for _, p := range f {
		switch p.verb {
		case 0:
			buf = append(buf, p.lit...)
		case 't':
			buf = append(buf, r.Topic...)
		case 'p':
			buf = strconv.AppendInt(buf, int64(r.Partition), 10)
		case 'o':
			buf = strconv.AppendInt(buf, r.Offset, 10)
		case 'T':
			buf = strconv.AppendInt(buf, r.Timestamp.UnixMilli(), 10)
		case 'k':
			buf = append(buf, r.Key...)
		case 'v', 's':
			buf = append(buf, r.Value...)
		case 'K':
			buf = appendLen(buf, r.Key)
		case 'S':
			buf = appendLen(buf, r.Value)
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					buf = append(buf, ',')
				}
				buf = append(buf, h.Key...)
				buf = append(buf, '=')
				buf = append(buf, h.Value...)
			}
		}
	}
	return buf
}

func appendLen(buf, b []byte) []byte {
	if b == nil {
		return append(buf, "-1"...)
	}
	return strconv.AppendInt(buf, int64(len(b)), 10)
}

// jsonRecord is the --json shape: one object per line. Key and value are
// strings (invalid UTF-8 becomes U+FFFD) or null; duplicate header keys keep
// the last value.
type jsonRecord struct {
	Topic     string            `json:"topic"`
	Partition int32             `json:"partition"`
	Offset    int64             `json:"offset"`
	Timestamp int64             `json:"timestamp"`
	Key       *string           `json:"key"`
	Value     *string           `json:"value"`
	Headers   map[string]string `json:"headers"`
}

type jsonFormat struct{}

func (jsonFormat) appendRecord(buf []byte, r *kgo.Record) []byte {
	jr := jsonRecord{
		Topic:     r.Topic,
		Partition: r.Partition,
		Offset:    r.Offset,
		Timestamp: r.Timestamp.UnixMilli(),
		Key:       nullableString(r.Key),
		Value:     nullableString(r.Value),
		Headers:   make(map[string]string, len(r.Headers)),
	}
	for _, h := range r.Headers {
		jr.Headers[h.Key] = string(h.Value)
	}
	// An Encoder with HTML escaping off keeps values like "<a>" readable;
	// it also appends the newline.
	out := bytes.NewBuffer(buf)
	enc := json.NewEncoder(out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(jr); err != nil {
		panic(fmt.Sprintf("cli: encoding record as JSON: %v", err)) // only strings and ints: cannot fail
	}
	return out.Bytes()
}

func nullableString(b []byte) *string {
	if b == nil {
		return nil
	}
	s := string(b)
	return &s
}
