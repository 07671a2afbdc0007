package trace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/lineage"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Log is what tracing needs of the log.
type Log interface {
	Partitions(topic string) (int32, error)
	Offsets(topic string, partition int32) (start, end int64, err error)
	// OffsetForTime is the first offset with a timestamp at or after ts,
	// or -1 when there is none.
	OffsetForTime(ctx context.Context, topic string, partition int32, ts int64) (int64, error)
	// Read returns whole batches from the one holding offset.
	Read(ctx context.Context, topic string, partition int32, offset int64, maxBytes int32) ([]byte, error)
	Decode(ctx context.Context, topic string, partition int32, b []byte) (*batch.Decoded, error)
}

// Producers names the holder of a producer id (internal/lineage).
type Producers interface {
	Producer(ctx context.Context, pid int64) (lineage.Producer, bool)
}

// Tracer answers queries.
type Tracer struct {
	log       Log
	producers Producers
	groups    lag.Groups
}

// New returns a tracer.
func New(log Log, producers Producers, groups lag.Groups) *Tracer {
	return &Tracer{log: log, producers: producers, groups: groups}
}

// Query selects records of one topic. Every set criterion must match.
type Query struct {
	Topic string
	// Key matches the record key exactly (HasKey set).
	Key    string
	HasKey bool
	// HeaderName/HeaderValue match a header (HeaderName set).
	HeaderName, HeaderValue string
	// Partition (-1: all) and Offset (-1: any) pick one record.
	Partition int32
	Offset    int64
	// StartOffset (-1: none), with Partition, lists records from that
	// offset on (a message browser's page).
	StartOffset int64
	// From and To bound timestamps, Unix ms (0: unbounded).
	From, To int64
	// Limit is the most records returned (default 100).
	Limit int
	// MaxScanBytes bounds the bytes read (default 4 GiB).
	MaxScanBytes int64
	// Raw adds each record's key and value bytes (KeyRaw, ValueRaw) when
	// they are at most RawMax bytes (RawLimit when set): for decoders
	// (the console's schema registry view).
	Raw bool
	// RawLimit raises RawMax up to RawMaxOne for a query of one record
	// (Offset set): the console's view of a whole record.
	RawLimit int
}

// RawMax bounds a key or value returned as bytes (Query.Raw).
const RawMax = 64 << 10

// RawMaxOne bounds Query.RawLimit.
const RawMaxOne = 8 << 20

// Header is one record header.
type Header struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

// Producer is who produced a record, as the broker saw it.
type Producer struct {
	ProducerID      int64  `json:"producer_id"`
	Epoch           int16  `json:"epoch"`
	ClientID        string `json:"client_id,omitempty"`
	Principal       string `json:"principal,omitempty"`
	TransactionalID string `json:"transactional_id,omitempty"`
	// Known: the producer id was recorded at InitProducerID.
	Known bool `json:"known"`
}

// GroupPosition is where a group that reads the topic stands.
type GroupPosition struct {
	Group     string `json:"group"`
	Committed int64  `json:"committed_offset"`
	// Past: the group has committed past the record (it consumed it).
	Past bool `json:"past"`
}

// Hop is a retry or dead-letter step of a record.
type Hop struct {
	// Direction is "from" (this record is a copy of Topic-Partition@Offset)
	// or "to" (a copy of this record is at Topic-Partition@Offset).
	Direction string `json:"direction"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Timestamp int64  `json:"timestamp_ms,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Attempts  string `json:"attempts,omitempty"`
	Error     string `json:"error,omitempty"`
	Group     string `json:"group,omitempty"`
}

// Record is one found record and its story.
type Record struct {
	Topic         string          `json:"topic"`
	Partition     int32           `json:"partition"`
	Offset        int64           `json:"offset"`
	Timestamp     int64           `json:"timestamp_ms"`
	TimestampType string          `json:"timestamp_type"`
	Key           *string         `json:"key"`
	ValueBytes    int             `json:"value_bytes"`
	Value         string          `json:"value_preview"`
	KeyRaw        []byte          `json:"key_raw,omitempty"`
	ValueRaw      []byte          `json:"value_raw,omitempty"`
	Headers       []Header        `json:"headers"`
	Producer      Producer        `json:"producer"`
	Transaction   string          `json:"transaction"`
	Groups        []GroupPosition `json:"groups"`
	Hops          []Hop           `json:"hops,omitempty"`
}

// Result is a query's answer.
type Result struct {
	Records      []Record `json:"records"`
	ScannedBytes int64    `json:"scanned_bytes"`
	// Truncated says why the scan stopped early ("" when it did not).
	Truncated string `json:"truncated,omitempty"`
}

// ErrBadQuery is a query that cannot run.
var ErrBadQuery = errors.New("trace: bad query")

const valuePreview = 256

// Find runs q.
func (t *Tracer) Find(ctx context.Context, q Query) (Result, error) {
	if q.Topic == "" {
		return Result{}, fmt.Errorf("%w: a topic is required", ErrBadQuery)
	}
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.MaxScanBytes <= 0 {
		q.MaxScanBytes = 4 << 30
	}
	n, err := t.log.Partitions(q.Topic)
	if err != nil {
		return Result{}, err
	}
	parts := []int32{}
	if q.Partition >= 0 {
		if q.Partition >= n {
			return Result{}, fmt.Errorf("%w: topic %s has %d partitions", ErrBadQuery, q.Topic, n)
		}
		parts = append(parts, q.Partition)
	} else {
		for p := range n {
			parts = append(parts, p)
		}
	}
	s := &scan{t: t, q: q}
	var wg sync.WaitGroup
	work := make(chan int32)
	workers := min(len(parts), 4)
	errs := make([]error, len(parts))
	for range workers {
		wg.Go(func() {
			for p := range work {
				if err := s.partition(ctx, p); err != nil {
					errs[slices.Index(parts, p)] = err
				}
			}
		})
	}
	for _, p := range parts {
		work <- p
	}
	close(work)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return Result{}, err
	}
	res := s.result()
	if err := t.annotate(ctx, res.Records); err != nil {
		return Result{}, err
	}
	return res, nil
}

// scan is one query's shared state across partitions.
type scan struct {
	t       *Tracer
	q       Query
	scanned atomic.Int64
	mu      sync.Mutex
	found   []Record
	full    bool
	over    bool
}

func (s *scan) result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	slices.SortFunc(s.found, func(a, b Record) int {
		if a.Timestamp != b.Timestamp {
			return compare(a.Timestamp, b.Timestamp)
		}
		if a.Partition != b.Partition {
			return compare(a.Partition, b.Partition)
		}
		return compare(a.Offset, b.Offset)
	})
	r := Result{Records: s.found, ScannedBytes: s.scanned.Load()}
	if len(r.Records) > s.q.Limit {
		r.Records = r.Records[:s.q.Limit]
	}
	switch {
	case s.over:
		r.Truncated = fmt.Sprintf("stopped after reading %d bytes (the scan limit): give a time range (--from/--to) to narrow it", s.scanned.Load())
	case s.full:
		r.Truncated = fmt.Sprintf("stopped at %d records (the limit)", s.q.Limit)
	}
	if r.Records == nil {
		r.Records = []Record{}
	}
	return r
}

func compare[T int64 | int32](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// add keeps a match; false when the query has enough.
func (s *scan) add(r Record) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.found = append(s.found, r)
	if len(s.found) >= s.q.Limit {
		s.full = true
	}
	return !s.full
}

func (s *scan) done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.full || s.over
}

// readChunk is how much one read of a partition asks for.
const readChunk = 1 << 20

// partition scans one partition.
func (s *scan) partition(ctx context.Context, p int32) error {
	q, l := s.q, s.t.log
	start, end, err := l.Offsets(q.Topic, p)
	if err != nil {
		return err
	}
	from := start
	if q.Offset >= 0 {
		from = q.Offset
	} else if q.StartOffset >= 0 {
		from = max(q.StartOffset, start)
	} else if q.From > 0 {
		off, err := l.OffsetForTime(ctx, q.Topic, p, q.From)
		if err != nil {
			return err
		}
		if off < 0 {
			return nil // nothing at or after From
		}
		from = max(off, start)
	}
	for from < end && !s.done() {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, err := l.Read(ctx, q.Topic, p, from, readChunk)
		if err != nil {
			return err
		}
		if len(b) == 0 {
			return nil
		}
		if s.scanned.Add(int64(len(b))) > q.MaxScanBytes {
			s.mu.Lock()
			s.over = true
			s.mu.Unlock()
		}
		for len(b) >= batch.HeaderSize {
			size, err := batch.Size(b)
			if err != nil || size > len(b) {
				return nil
			}
			bt := b[:size]
			b = b[size:]
			next := batch.LastOffset(bt) + 1
			if next <= from {
				continue
			}
			stop, err := s.batch(ctx, p, bt, from)
			if err != nil || stop {
				return err
			}
			from = next
		}
	}
	return nil
}

// batch matches the records of one batch at or after from; stop when the
// scan of this partition is over.
func (s *scan) batch(ctx context.Context, p int32, bt []byte, from int64) (bool, error) {
	q := s.q
	h, err := batch.ParseHeader(bt)
	if err != nil {
		return false, nil
	}
	if h.Attributes&batch.AttrControl != 0 {
		return false, nil
	}
	if q.To > 0 && h.FirstTimestamp > q.To && h.Attributes&batch.AttrLogAppendTime == 0 {
		// CreateTime can go backwards between batches, but a batch whose
		// first record is past To starts beyond the range's end.
		return true, nil
	}
	if q.From > 0 && h.MaxTimestamp < q.From {
		return false, nil
	}
	x, err := s.t.log.Decode(ctx, q.Topic, p, bt)
	if err != nil {
		return false, nil // undecodable: nothing to match in it
	}
	defer x.Release()
	logAppend := h.Attributes&batch.AttrLogAppendTime != 0
	for i := range x.Records {
		r := &x.Records[i]
		off := h.BaseOffset + int64(r.OffsetDelta)
		if off < from {
			continue
		}
		if q.Offset >= 0 && off != q.Offset {
			return true, nil
		}
		ts := h.FirstTimestamp + r.TimestampDelta64
		if logAppend {
			ts = h.MaxTimestamp
		}
		if (q.From > 0 && ts < q.From) || (q.To > 0 && ts > q.To) {
			continue
		}
		if q.HasKey && (r.Key == nil || string(r.Key) != q.Key) {
			continue
		}
		if q.HeaderName != "" && !hasHeader(r.Headers, q.HeaderName, q.HeaderValue) {
			continue
		}
		rec := Record{Topic: q.Topic, Partition: p, Offset: off, Timestamp: ts, TimestampType: "create", ValueBytes: len(r.Value),
			Value: preview(r.Value), Producer: Producer{ProducerID: h.ProducerID, Epoch: h.ProducerEpoch}, Transaction: "none"}
		if logAppend {
			rec.TimestampType = "log-append"
		}
		if r.Key != nil {
			k := preview(r.Key)
			rec.Key = &k
		}
		if q.Raw {
			limit := RawMax
			if q.RawLimit > 0 {
				limit = min(q.RawLimit, RawMaxOne)
			}
			if len(r.Key) <= limit {
				rec.KeyRaw = bytes.Clone(r.Key)
			}
			if len(r.Value) <= limit {
				rec.ValueRaw = bytes.Clone(r.Value)
			}
		}
		for _, hd := range r.Headers {
			rec.Headers = append(rec.Headers, Header{Key: hd.Key, Value: preview(hd.Value)})
		}
		if h.Attributes&batch.AttrTransactional != 0 {
			rec.Transaction = "pending"
		}
		if !s.add(rec) || q.Offset >= 0 {
			return true, nil
		}
	}
	return false, nil
}

func hasHeader(hs []kmsg.Header, name, value string) bool {
	for _, h := range hs {
		if h.Key == name && string(h.Value) == value {
			return true
		}
	}
	return false
}

// preview is b as text, cut to valuePreview bytes, invalid UTF-8 replaced.
func preview(b []byte) string {
	cut := len(b) > valuePreview
	if cut {
		b = b[:valuePreview]
	}
	s := strings.ToValidUTF8(string(b), string(utf8.RuneError))
	if cut {
		s += "..."
	}
	return s
}
