package trace

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

// Handler serves GET /v1/trace (docs/api.md).
func (t *Tracer) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/trace", func(w http.ResponseWriter, r *http.Request) {
		q, err := ParseQuery(r.URL.Query(), time.Now())
		if err != nil {
			adminapi.Error(w, http.StatusBadRequest, err.Error())
			return
		}
		res, err := t.Find(r.Context(), q)
		switch {
		case errors.Is(err, ErrBadQuery):
			adminapi.Error(w, http.StatusBadRequest, err.Error())
		case err != nil && strings.Contains(err.Error(), "unknown topic"):
			adminapi.Error(w, http.StatusNotFound, err.Error())
		case err != nil:
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
		default:
			adminapi.JSON(w, http.StatusOK, res)
		}
	})
	return mux
}

// ParseQuery reads a query from parameters: topic, key, header
// (NAME=VALUE), partition, offset, start_offset, from, to (RFC 3339, Unix ms, or a
// duration meaning that long before now), limit, raw (1: keys and values
// as bytes too, up to RawMax), raw_max (with raw and offset: up to that
// many bytes, at most RawMaxOne).
func ParseQuery(v url.Values, now time.Time) (Query, error) {
	get := v.Get
	q := Query{Topic: get("topic"), Partition: -1, Offset: -1, StartOffset: -1}
	bad := func(format string, args ...any) (Query, error) {
		return Query{}, fmt.Errorf("%w: %s", ErrBadQuery, fmt.Sprintf(format, args...))
	}
	if q.Topic == "" {
		return bad("topic is required")
	}
	if v.Has("key") {
		q.Key, q.HasKey = get("key"), true
	}
	if h := get("header"); h != "" {
		name, value, ok := strings.Cut(h, "=")
		if !ok || name == "" {
			return bad("header must be NAME=VALUE, got %q", h)
		}
		q.HeaderName, q.HeaderValue = name, value
	}
	if s := get("partition"); s != "" {
		v, err := strconv.ParseInt(s, 10, 32)
		if err != nil || v < 0 {
			return bad("partition must be a partition number, got %q", s)
		}
		q.Partition = int32(v)
	}
	if s := get("offset"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return bad("offset must be a non-negative integer, got %q", s)
		}
		if q.Partition < 0 {
			return bad("offset needs a partition")
		}
		q.Offset = v
	}
	if s := get("start_offset"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil || v < 0 {
			return bad("start_offset must be a non-negative integer, got %q", s)
		}
		if q.Partition < 0 {
			return bad("start_offset needs a partition")
		}
		q.StartOffset = v
	}
	var err error
	if q.From, err = parseTime(get("from"), now); err != nil {
		return bad("from: %v", err)
	}
	if q.To, err = parseTime(get("to"), now); err != nil {
		return bad("to: %v", err)
	}
	if q.To > 0 && q.From > q.To {
		return bad("from is after to")
	}
	if s := get("limit"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 || v > 10000 {
			return bad("limit must be 1..10000, got %q", s)
		}
		q.Limit = v
	}
	q.Raw = get("raw") == "1"
	if s := get("raw_max"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v <= 0 || v > RawMaxOne {
			return bad("raw_max must be 1..%d, got %q", RawMaxOne, s)
		}
		if !q.Raw || q.Offset < 0 {
			return bad("raw_max needs raw=1 and one record (partition and offset)")
		}
		q.RawLimit = v
	}
	if !q.HasKey && q.HeaderName == "" && q.Offset < 0 && q.StartOffset < 0 && q.From == 0 && q.To == 0 {
		return bad("give a key, a header, a partition and offset (or start_offset), or a time range (from/to)")
	}
	return q, nil
}

// parseTime reads RFC 3339, Unix milliseconds, or a duration ago; "" is 0.
func parseTime(s string, now time.Time) (int64, error) {
	switch {
	case s == "":
		return 0, nil
	case strings.ContainsAny(s, "T:") && !strings.HasSuffix(s, "s") && !strings.HasSuffix(s, "m") && !strings.HasSuffix(s, "h"):
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return 0, fmt.Errorf("%q is not RFC 3339", s)
		}
		return t.UnixMilli(), nil
	}
	if ms, err := strconv.ParseInt(s, 10, 64); err == nil && ms >= 0 {
		return ms, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a time (RFC 3339, Unix ms, or a duration ago like 1h)", s)
	}
	return now.Add(-d).UnixMilli(), nil
}
