package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sluice-mq/sluice/internal/trace"
)

// wholeMax bounds the key and value the record view reads and decodes:
// trace.RawMaxOne (8 MiB), the decoder's MaxValue too.
const wholeMax = trace.RawMaxOne

// textMax bounds the text shown of a key or value that is not decoded.
const textMax = 64 << 10

type recordData struct {
	Topic     string
	Partition int32
	Offset    int64
	Record    *shownRecord
	// KeyText and ValueText are the key and value as text (cut at
	// textMax) when they are not decoded.
	KeyText, ValueText string
	// TooBig: the value is over wholeMax, so only its preview is shown.
	TooBig bool
}

// WholeMax is the limit, for the page.
func (recordData) WholeMax() int { return wholeMax }

// record shows one record whole: its key and value read up to 8 MiB
// (GET /v1/trace with raw_max) and decoded through the schema registry
// like the message browser's smaller ones.
func (c *Console) record(w http.ResponseWriter, r *http.Request, s *session) {
	d := recordData{Topic: r.PathValue("topic")}
	title := fmt.Sprintf("%s: record", d.Topic)
	p, perr := strconv.ParseInt(r.PathValue("partition"), 10, 32)
	o, oerr := strconv.ParseInt(r.PathValue("offset"), 10, 64)
	if perr != nil || oerr != nil || p < 0 || o < 0 {
		c.page(w, s, http.StatusBadRequest, "record", title, d, fmt.Errorf("partition %q and offset %q: each a number from 0", r.PathValue("partition"), r.PathValue("offset")))
		return
	}
	d.Partition, d.Offset = int32(p), o
	title = fmt.Sprintf("%s-%d@%d", d.Topic, p, o)
	select {
	case c.wholeRecords <- struct{}{}:
		defer func() { <-c.wholeRecords }()
	case <-r.Context().Done():
		return
	}
	q := url.Values{"topic": {d.Topic}, "partition": {strconv.FormatInt(p, 10)}, "offset": {strconv.FormatInt(o, 10)},
		"limit": {"1"}, "raw": {"1"}, "raw_max": {strconv.Itoa(wholeMax)}}
	var res trace.Result
	code, err := c.call(r, s, "GET", "/v1/trace?"+q.Encode(), nil, &res)
	if err == nil && (len(res.Records) == 0 || res.Records[0].Offset != o) {
		code, err = http.StatusNotFound, fmt.Errorf("no record at offset %d of partition %d (deleted by retention or compaction, a control record, or past the end)", o, p)
	}
	if err != nil {
		c.page(w, s, max(code, http.StatusBadRequest), "record", title, d, err)
		return
	}
	shown := c.decodeRecords(r, s, res.Records[:1])
	d.Record = &shown[0]
	rec := d.Record.Record
	d.TooBig = rec.ValueBytes > wholeMax
	if d.Record.Key.Decoded == nil || d.Record.Key.Err != "" {
		d.KeyText = asText(rec.KeyRaw)
		if rec.KeyRaw == nil && rec.Key != nil && len(*rec.Key) > 0 {
			// Over wholeMax: only trace's preview.
			d.KeyText = *rec.Key + fmt.Sprintf(" (over %d bytes: only its start)", wholeMax)
		}
	}
	if d.Record.Value.Decoded == nil || d.Record.Value.Err != "" {
		d.ValueText = asText(rec.ValueRaw)
	}
	c.page(w, s, http.StatusOK, "record", title, d, nil)
}

// asText is b as text, cut at textMax, invalid UTF-8 replaced.
func asText(b []byte) string {
	cut := len(b) > textMax
	if cut {
		b = b[:textMax]
	}
	t := strings.ToValidUTF8(string(b), string(utf8.RuneError))
	if cut {
		t += fmt.Sprintf("... (the first %d bytes)", textMax)
	}
	return t
}
