package console

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/sluice-mq/sluice/internal/console/decode"
	"github.com/sluice-mq/sluice/internal/trace"
)

// shownRecord is a record of the message browser with its key and value
// decoded through the schema registry, when they are in its wire format.
type shownRecord struct {
	trace.Record
	Key, Value shownPayload
}

// Whole: the value is over what the browser reads as bytes (trace.RawMax),
// so only the record's own page reads it whole and decodes it.
func (r shownRecord) Whole() bool {
	return r.ValueRaw == nil && r.ValueBytes > trace.RawMax && r.Value.Decoded == nil
}

// RawMax is the browser's limit, for the page.
func (shownRecord) RawMax() int { return trace.RawMax }

// shownPayload is a decoded key or value (Decoded nil: shown as text).
type shownPayload struct {
	Decoded *decode.Decoded
	Err     string
}

// decodeRecords decodes what the page shows through the registry, as the
// page's principal; without a registry records are shown as text.
func (c *Console) decodeRecords(r *http.Request, s *session, recs []trace.Record) []shownRecord {
	out := make([]shownRecord, len(recs))
	var d *decode.Decoder
	if c.registry != nil {
		d = decode.New(func(ctx context.Context, id int) (decode.Schema, error) { return c.schemaByID(r, s, id) })
	}
	for i, rec := range recs {
		out[i].Record = rec
		if d == nil {
			continue
		}
		out[i].Key = decodeOne(r.Context(), d, rec.KeyRaw)
		out[i].Value = decodeOne(r.Context(), d, rec.ValueRaw)
	}
	return out
}

func decodeOne(ctx context.Context, d *decode.Decoder, b []byte) shownPayload {
	got, err := d.Decode(ctx, b)
	switch {
	case errors.Is(err, decode.ErrNotWire):
		return shownPayload{}
	case err != nil:
		if got.SchemaID == 0 {
			return shownPayload{}
		}
		return shownPayload{Decoded: &got, Err: err.Error()}
	}
	return shownPayload{Decoded: &got}
}

// registryRef is a schema reference as the registry answers it.
type registryRef struct {
	Name    string `json:"name"`
	Subject string `json:"subject"`
	Version int    `json:"version"`
}

// maxRefs bounds the references followed for one schema.
const maxRefs = 64

// schemaByID asks the registry for schema id, its references' texts (and
// theirs) and one subject and version it is registered under.
func (c *Console) schemaByID(r *http.Request, s *session, id int) (decode.Schema, error) {
	var sc struct {
		SchemaType string        `json:"schemaType"`
		Schema     string        `json:"schema"`
		References []registryRef `json:"references"`
	}
	if code, err := c.callOn(c.registry, r, s, "GET", "/schemas/ids/"+strconv.Itoa(id), nil, &sc); err != nil {
		return decode.Schema{}, refusal(code, err)
	}
	out := decode.Schema{ID: id, Type: sc.SchemaType, Text: sc.Schema}
	var usages []struct {
		Subject string `json:"subject"`
		Version int    `json:"version"`
	}
	if _, err := c.callOn(c.registry, r, s, "GET", "/schemas/ids/"+strconv.Itoa(id)+"/versions", nil, &usages); err == nil && len(usages) > 0 {
		out.Subject, out.Version = usages[0].Subject, usages[0].Version
	}
	seen := map[string]bool{}
	queue := sc.References
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if seen[ref.Name] {
			continue
		}
		if len(seen) >= maxRefs {
			return decode.Schema{}, errors.New("more than 64 references")
		}
		seen[ref.Name] = true
		var v struct {
			Schema     string        `json:"schema"`
			References []registryRef `json:"references"`
		}
		path := "/subjects/" + url.PathEscape(ref.Subject) + "/versions/" + strconv.Itoa(ref.Version)
		if code, err := c.callOn(c.registry, r, s, "GET", path, nil, &v); err != nil {
			return decode.Schema{}, fmt.Errorf("reference %s: %w", ref.Name, refusal(code, err))
		}
		out.Refs = append(out.Refs, decode.Reference{Name: ref.Name, Text: v.Schema})
		queue = append(queue, v.References...)
	}
	return out, nil
}

// refusal says why a schema lookup was refused: the registry applies the
// broker's ACLs to the console's principal (docs/schema-registry.md), so
// the record is shown as its raw bytes.
func refusal(code int, err error) error {
	if code == http.StatusForbidden {
		return fmt.Errorf("you may not read this schema (%v): reading a schema needs DESCRIBE on the topic of a subject it is registered under", err)
	}
	return err
}
