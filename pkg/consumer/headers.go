package consumer

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Header names of the retry convention (docs/retries.md). Values are
// decimal ASCII unless said otherwise; a consumer in any language can follow
// them.
const (
	// HeaderDelayMs asks a sluice broker to append the record that many
	// milliseconds after it is acknowledged. Other brokers ignore it, which
	// is why HeaderDueAt exists.
	HeaderDelayMs = "sluice-delay-ms"
	// HeaderDueAt is the Unix time in milliseconds before which a retry
	// record must not be handled. Consumers wait for it themselves, so a
	// broker that ignores HeaderDelayMs never causes an early retry.
	HeaderDueAt = "sluice-retry-due-at"
	// HeaderAttempts is how many times the record's handler has run so far,
	// over every delivery (blocking attempts included).
	HeaderAttempts = "sluice-retry-attempts"
	// HeaderKind says what a record in a retry topic is: KindRetry,
	// KindPark, KindHold or KindDone.
	HeaderKind = "sluice-retry-kind"
	// HeaderDoneOffset, on a KindDone marker, is the offset in the same
	// retry partition of the record the marker says is finished.
	HeaderDoneOffset = "sluice-retry-done-offset"

	// HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset and
	// HeaderOriginalTimestamp (Unix ms) name the record as it was first
	// produced; together the first three identify it across retries.
	HeaderOriginalTopic     = "sluice-original-topic"
	HeaderOriginalPartition = "sluice-original-partition"
	HeaderOriginalOffset    = "sluice-original-offset"
	HeaderOriginalTimestamp = "sluice-original-timestamp"

	// HeaderError is the text of the last handler error (dead letters).
	HeaderError = "sluice-error"
	// HeaderGroup is the consumer group that gave the record up.
	HeaderGroup = "sluice-group"
	// HeaderDeadAt is the Unix time in milliseconds the record was written
	// to the dead-letter topic.
	HeaderDeadAt = "sluice-dead-at"
	// HeaderReplayOf marks a record replayed from a dead-letter topic:
	// "<dlq topic>/<partition>/<offset>".
	HeaderReplayOf = "sluice-replay-of"
	// HeaderMessageID is the producer-assigned id the dedup helper reads.
	HeaderMessageID = "sluice-message-id"
)

// Kinds of record in a retry topic.
const (
	// KindRetry is a record whose handler failed; handle it again at or
	// after its due time.
	KindRetry = "retry"
	// KindPark is a later record of a key that had a record waiting in the
	// retry topic; handle it, in order, once that record is done.
	KindPark = "park"
	// KindHold is a marker with no value: from here on, the key is held
	// until the record it names (by its original headers) is done. It is
	// written before the retry record itself, so a key is known to be held
	// even while a sluice broker still keeps the delayed retry record.
	KindHold = "hold"
	// KindDone is a marker with no value written by ExactlyOnce consumers:
	// the retry-topic record at HeaderDoneOffset was finished (its outcome
	// committed in the same transaction as this marker) although the
	// group's offset could not yet move past it. A consumer that reads the
	// record again skips it; a finished hold names no held key.
	KindDone = "done"
)

// Suffixes of the default retry and dead-letter topic names.
const (
	RetrySuffix = ".retry"
	DLQSuffix   = ".dlq"
)

// ErrBadHeader is returned when a convention header has a malformed value.
var ErrBadHeader = errors.New("consumer: malformed header")

// Origin identifies a record as it was first produced.
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// ID is "topic/partition/offset", unique per original record.
func (o Origin) ID() string {
	return o.Topic + "/" + strconv.FormatInt(int64(o.Partition), 10) + "/" + strconv.FormatInt(o.Offset, 10)
}

// RetryInfo is what the convention headers of a record say.
type RetryInfo struct {
	Kind       string    // "" for a record that was never retried
	Attempts   int       // handler runs so far
	DoneOffset int64     // KindDone: the offset of the finished record
	DueAt      time.Time // zero if none
	Origin     Origin    // the record itself when it carries no origin headers
	HasOrigin  bool
}

// HeaderValue returns the value of the last header named key, and whether
// there was one.
func HeaderValue(r *kgo.Record, key string) (string, bool) {
	for i := len(r.Headers) - 1; i >= 0; i-- {
		if r.Headers[i].Key == key {
			return string(r.Headers[i].Value), true
		}
	}
	return "", false
}

// parseUint parses a non-negative decimal with at most 19 digits, no sign,
// no spaces: the only form the convention allows.
func parseUint(name, s string, max int64) (int64, error) {
	if s == "" || len(s) > 19 {
		return 0, fmt.Errorf("%w %s: %q is not a decimal number", ErrBadHeader, name, s)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w %s: %q is not a decimal number", ErrBadHeader, name, s)
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v > max {
		return 0, fmt.Errorf("%w %s: %q is out of range (0..%d)", ErrBadHeader, name, s, max)
	}
	return v, nil
}

const (
	maxAttempts  = 1 << 30
	maxTimestamp = 1<<53 - 1 // far beyond any date; keeps time.UnixMilli exact
)

// DecodeRetryInfo reads the convention headers of r. A record without them
// is its own origin with zero attempts. Any malformed value is an error
// naming the header.
func DecodeRetryInfo(r *kgo.Record) (RetryInfo, error) {
	info := RetryInfo{Origin: Origin{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}}
	if v, ok := HeaderValue(r, HeaderKind); ok {
		switch v {
		case KindRetry, KindPark, KindHold, KindDone:
			info.Kind = v
		default:
			return info, fmt.Errorf("%w %s: unknown kind %q", ErrBadHeader, HeaderKind, v)
		}
	}
	if v, ok := HeaderValue(r, HeaderAttempts); ok {
		n, err := parseUint(HeaderAttempts, v, maxAttempts)
		if err != nil {
			return info, err
		}
		info.Attempts = int(n)
	}
	if v, ok := HeaderValue(r, HeaderDoneOffset); ok {
		n, err := parseUint(HeaderDoneOffset, v, 1<<63-1)
		if err != nil {
			return info, err
		}
		info.DoneOffset = n
	} else if info.Kind == KindDone {
		return info, fmt.Errorf("%w: a %s record must carry %s", ErrBadHeader, KindDone, HeaderDoneOffset)
	}
	if v, ok := HeaderValue(r, HeaderDueAt); ok {
		n, err := parseUint(HeaderDueAt, v, maxTimestamp)
		if err != nil {
			return info, err
		}
		info.DueAt = time.UnixMilli(n)
	}
	topic, hasTopic := HeaderValue(r, HeaderOriginalTopic)
	part, hasPart := HeaderValue(r, HeaderOriginalPartition)
	off, hasOff := HeaderValue(r, HeaderOriginalOffset)
	if !hasTopic && !hasPart && !hasOff {
		if info.Kind != "" {
			return info, fmt.Errorf("%w: a %s record must carry %s, %s and %s", ErrBadHeader, info.Kind, HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset)
		}
		return info, nil
	}
	if !hasTopic || !hasPart || !hasOff || topic == "" {
		return info, fmt.Errorf("%w: %s, %s and %s go together", ErrBadHeader, HeaderOriginalTopic, HeaderOriginalPartition, HeaderOriginalOffset)
	}
	p, err := parseUint(HeaderOriginalPartition, part, 1<<31-1)
	if err != nil {
		return info, err
	}
	o, err := parseUint(HeaderOriginalOffset, off, 1<<63-1)
	if err != nil {
		return info, err
	}
	info.Origin = Origin{Topic: topic, Partition: int32(p), Offset: o}
	info.HasOrigin = true
	if v, ok := HeaderValue(r, HeaderOriginalTimestamp); ok {
		ts, err := parseUint(HeaderOriginalTimestamp, v, maxTimestamp)
		if err != nil {
			return info, err
		}
		info.Origin.Timestamp = time.UnixMilli(ts)
	}
	return info, nil
}

// isConvention reports whether a header is one this package writes, so it is
// not copied from one retry round to the next.
func isConvention(key string) bool {
	return strings.HasPrefix(key, "sluice-retry-") || strings.HasPrefix(key, "sluice-original-") ||
		key == HeaderDelayMs || key == "sluice-deliver-at" || key == HeaderError ||
		key == HeaderGroup || key == HeaderDeadAt
}

// userHeaders are r's headers without the convention's own.
func userHeaders(r *kgo.Record) []kgo.RecordHeader {
	out := make([]kgo.RecordHeader, 0, len(r.Headers)+8)
	for _, h := range r.Headers {
		if !isConvention(h.Key) {
			out = append(out, h)
		}
	}
	return out
}

func itoa(v int64) []byte { return strconv.AppendInt(nil, v, 10) }

func originHeaders(h []kgo.RecordHeader, o Origin) []kgo.RecordHeader {
	h = append(h,
		kgo.RecordHeader{Key: HeaderOriginalTopic, Value: []byte(o.Topic)},
		kgo.RecordHeader{Key: HeaderOriginalPartition, Value: itoa(int64(o.Partition))},
		kgo.RecordHeader{Key: HeaderOriginalOffset, Value: itoa(o.Offset)},
	)
	if !o.Timestamp.IsZero() {
		h = append(h, kgo.RecordHeader{Key: HeaderOriginalTimestamp, Value: itoa(o.Timestamp.UnixMilli())})
	}
	return h
}

// retryRecord builds the record written to the retry topic for r: kind is
// KindRetry (with a delay) or KindPark (delay 0). brokerDelay says whether
// to ask the broker to keep the record back (HeaderDelayMs); a transactional
// batch may not (a sluice broker refuses delay headers there), and the
// consumer then waits for HeaderDueAt itself.
func retryRecord(r *kgo.Record, topic string, kind string, info RetryInfo, delay time.Duration, now time.Time, brokerDelay bool) *kgo.Record {
	h := userHeaders(r)
	h = originHeaders(h, info.Origin)
	h = append(h,
		kgo.RecordHeader{Key: HeaderKind, Value: []byte(kind)},
		kgo.RecordHeader{Key: HeaderAttempts, Value: itoa(int64(info.Attempts))},
	)
	if kind == KindRetry {
		h = append(h, kgo.RecordHeader{Key: HeaderDueAt, Value: itoa(now.Add(delay).UnixMilli())})
		if ms := delay.Milliseconds(); ms > 0 && brokerDelay {
			h = append(h, kgo.RecordHeader{Key: HeaderDelayMs, Value: itoa(ms)})
		}
	} else if !info.DueAt.IsZero() {
		// A parked retry keeps its due time.
		h = append(h, kgo.RecordHeader{Key: HeaderDueAt, Value: itoa(info.DueAt.UnixMilli())})
	}
	return &kgo.Record{Topic: topic, Partition: info.Origin.Partition, Key: r.Key, Value: r.Value, Headers: h}
}

// holdRecord is the marker that holds r's key until origin is done.
func holdRecord(r *kgo.Record, topic string, o Origin, due time.Time) *kgo.Record {
	h := originHeaders(nil, o)
	h = append(h,
		kgo.RecordHeader{Key: HeaderKind, Value: []byte(KindHold)},
		kgo.RecordHeader{Key: HeaderDueAt, Value: itoa(due.UnixMilli())},
	)
	return &kgo.Record{Topic: topic, Partition: o.Partition, Key: r.Key, Headers: h}
}

// doneRecord is the marker that says the retry-topic record r, with origin
// o, is finished (KindDone).
func doneRecord(r *kgo.Record, o Origin) *kgo.Record {
	h := originHeaders(nil, o)
	h = append(h,
		kgo.RecordHeader{Key: HeaderKind, Value: []byte(KindDone)},
		kgo.RecordHeader{Key: HeaderDoneOffset, Value: itoa(r.Offset)},
	)
	return &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Headers: h}
}

// deadRecord builds the dead-letter record for r.
func deadRecord(r *kgo.Record, topic, group string, info RetryInfo, cause error, now time.Time) *kgo.Record {
	h := userHeaders(r)
	o := info.Origin
	if o.Timestamp.IsZero() {
		o.Timestamp = r.Timestamp
	}
	h = originHeaders(h, o)
	msg := "<nil>"
	if cause != nil {
		msg = cause.Error()
	}
	if len(msg) > 4096 {
		msg = msg[:4096]
	}
	h = append(h,
		kgo.RecordHeader{Key: HeaderError, Value: []byte(msg)},
		kgo.RecordHeader{Key: HeaderAttempts, Value: itoa(int64(info.Attempts))},
		kgo.RecordHeader{Key: HeaderGroup, Value: []byte(group)},
		kgo.RecordHeader{Key: HeaderDeadAt, Value: itoa(now.UnixMilli())},
	)
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: h}
}
