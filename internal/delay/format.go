package delay

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// The records of __sluice_delay (docs/delayed-delivery.md, "In the log").
// Keys are compacted on: an entry's key is its place in the target
// partition, so a producer's retry that writes it again replaces it, and a
// tombstone removes it once delivered or cancelled. A marker's key is its
// target partition: only the newest marker of each matters.
const (
	kindEntry  = 'E'
	kindMarker = 'M'

	formatVersion = 0
)

// ErrFormat is a store record that does not decode.
var ErrFormat = errors.New("delay: malformed store record")

// Target is a topic-partition that delayed records go to.
type Target struct {
	Topic     string
	Partition int32
}

func (t Target) String() string { return fmt.Sprintf("%s-%d", t.Topic, t.Partition) }

// StorePartition is the store partition holding t's pending records.
func StorePartition(t Target, n int32) int32 {
	h := fnv.New32a()
	h.Write([]byte(t.Topic))
	v := int64(h.Sum32()) + int64(t.Partition)
	return int32(v % int64(n))
}

// EntryKey is the key of the entry reserved at offset off of t.
func EntryKey(t Target, off int64) []byte {
	b := make([]byte, 0, 1+2+len(t.Topic)+4+8)
	b = append(b, kindEntry)
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Topic)))
	b = append(b, t.Topic...)
	b = binary.BigEndian.AppendUint32(b, uint32(t.Partition))
	return binary.BigEndian.AppendUint64(b, uint64(off))
}

func markerKey(t Target) []byte {
	b := make([]byte, 0, 1+2+len(t.Topic)+4)
	b = append(b, kindMarker)
	b = binary.BigEndian.AppendUint16(b, uint16(len(t.Topic)))
	b = append(b, t.Topic...)
	return binary.BigEndian.AppendUint32(b, uint32(t.Partition))
}

// ParseKey decodes a store key: its kind, target, and for an entry its
// reserved offset.
func ParseKey(k []byte) (kind byte, t Target, off int64, err error) {
	if len(k) < 3 {
		return 0, t, 0, fmt.Errorf("%w: key of %d bytes", ErrFormat, len(k))
	}
	kind = k[0]
	n := int(binary.BigEndian.Uint16(k[1:]))
	rest := k[3:]
	want := n + 4
	switch kind {
	case kindEntry:
		want += 8
	case kindMarker:
	default:
		return 0, t, 0, fmt.Errorf("%w: key kind %q", ErrFormat, kind)
	}
	if len(rest) != want {
		return 0, t, 0, fmt.Errorf("%w: key of %d bytes for a topic of %d", ErrFormat, len(k), n)
	}
	t.Topic = string(rest[:n])
	t.Partition = int32(binary.BigEndian.Uint32(rest[n:]))
	if kind == kindEntry {
		off = int64(binary.BigEndian.Uint64(rest[n+4:]))
	}
	return kind, t, off, nil
}

// Entry is one held record: what is delivered when due.
type Entry struct {
	Due       int64 // Unix ms
	Timestamp int64 // the record's timestamp as produced
	Key       []byte
	Value     []byte
	Headers   []kmsg.Header
}

// AppendEntry encodes e as an entry record's value:
// version int8, due int64, timestamp int64, key, value (varint length, -1
// null), header count varint, then each header's key and value alike.
func AppendEntry(b []byte, e *Entry) []byte {
	b = append(b, formatVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(e.Due))
	b = binary.BigEndian.AppendUint64(b, uint64(e.Timestamp))
	b = appendBytes(b, e.Key)
	b = appendBytes(b, e.Value)
	b = binary.AppendVarint(b, int64(len(e.Headers)))
	for _, h := range e.Headers {
		b = appendBytes(b, []byte(h.Key))
		b = appendBytes(b, h.Value)
	}
	return b
}

// appendEntryRaw is AppendEntry for a record walked in place: hdrs are
// its headers as the record encodes them (a varint count, then each key
// and value), which is how an entry encodes them too, so they are copied
// as they are.
func appendEntryRaw(b []byte, due, ts int64, key, value, hdrs []byte) []byte {
	b = append(b, formatVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(due))
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	b = appendBytes(b, key)
	b = appendBytes(b, value)
	return append(b, hdrs...)
}

// entryLenRaw is the size of appendEntryRaw's value.
func entryLenRaw(key, value, hdrs []byte) int {
	return 17 + bytesLen(key) + bytesLen(value) + len(hdrs)
}

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	b = binary.AppendVarint(b, int64(len(v)))
	return append(b, v...)
}

// entryDue reads only the due time of an entry value: what a replay needs.
func entryDue(v []byte) (int64, error) {
	if len(v) < 17 || v[0] != formatVersion {
		return 0, fmt.Errorf("%w: entry value of %d bytes", ErrFormat, len(v))
	}
	return int64(binary.BigEndian.Uint64(v[1:])), nil
}

// DecodeEntry decodes an entry value. The slices alias v.
func DecodeEntry(v []byte) (Entry, error) {
	var e Entry
	due, err := entryDue(v)
	if err != nil {
		return e, err
	}
	e.Due = due
	e.Timestamp = int64(binary.BigEndian.Uint64(v[9:]))
	r := v[17:]
	if e.Key, r, err = readBytes(r); err != nil {
		return e, err
	}
	if e.Value, r, err = readBytes(r); err != nil {
		return e, err
	}
	n, w := binary.Varint(r)
	if w <= 0 || n < 0 || n > int64(len(r)) {
		return e, fmt.Errorf("%w: header count", ErrFormat)
	}
	r = r[w:]
	if n > 0 {
		e.Headers = make([]kmsg.Header, 0, n)
	}
	for range n {
		var k, hv []byte
		if k, r, err = readBytes(r); err != nil {
			return e, err
		}
		if k == nil {
			return e, fmt.Errorf("%w: null header key", ErrFormat)
		}
		if hv, r, err = readBytes(r); err != nil {
			return e, err
		}
		e.Headers = append(e.Headers, kmsg.Header{Key: string(k), Value: hv})
	}
	if len(r) != 0 {
		return e, fmt.Errorf("%w: %d bytes after the entry", ErrFormat, len(r))
	}
	return e, nil
}

func readBytes(r []byte) ([]byte, []byte, error) {
	l, n := binary.Varint(r)
	if n <= 0 || l < -1 || l > int64(len(r)-n) {
		return nil, nil, fmt.Errorf("%w: field length", ErrFormat)
	}
	r = r[n:]
	if l == -1 {
		return nil, r, nil
	}
	return r[:l:l], r[l:], nil
}

// Marker says that entries of one target are being delivered: the batch
// appended to the target with ProducerID, Epoch and FirstSeq holds them in
// this order. Value: version int8, producer id int64, epoch int16, first
// sequence int32, count varint, then per entry its store offset int64 and
// its reserved offset int64.
type Marker struct {
	ProducerID int64
	Epoch      int16
	FirstSeq   int32
	Entries    []MarkerEntry
}

// MarkerEntry names one entry of a marker.
type MarkerEntry struct {
	StoreOffset, Reserved int64
}

// AppendMarker encodes m.
func AppendMarker(b []byte, m *Marker) []byte {
	b = append(b, formatVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(m.ProducerID))
	b = binary.BigEndian.AppendUint16(b, uint16(m.Epoch))
	b = binary.BigEndian.AppendUint32(b, uint32(m.FirstSeq))
	b = binary.AppendVarint(b, int64(len(m.Entries)))
	for _, e := range m.Entries {
		b = binary.BigEndian.AppendUint64(b, uint64(e.StoreOffset))
		b = binary.BigEndian.AppendUint64(b, uint64(e.Reserved))
	}
	return b
}

// DecodeMarker decodes a marker value.
func DecodeMarker(v []byte) (Marker, error) {
	var m Marker
	if len(v) < 15 || v[0] != formatVersion {
		return m, fmt.Errorf("%w: marker value of %d bytes", ErrFormat, len(v))
	}
	m.ProducerID = int64(binary.BigEndian.Uint64(v[1:]))
	m.Epoch = int16(binary.BigEndian.Uint16(v[9:]))
	m.FirstSeq = int32(binary.BigEndian.Uint32(v[11:]))
	r := v[15:]
	n, w := binary.Varint(r)
	if w <= 0 || n <= 0 || n > int64(len(r)-w)/16 {
		return m, fmt.Errorf("%w: marker entry count", ErrFormat)
	}
	r = r[w:]
	if int64(len(r)) != n*16 {
		return m, fmt.Errorf("%w: marker of %d bytes for %d entries", ErrFormat, len(r), n)
	}
	m.Entries = make([]MarkerEntry, n)
	for i := range m.Entries {
		m.Entries[i].StoreOffset = int64(binary.BigEndian.Uint64(r[16*i:]))
		m.Entries[i].Reserved = int64(binary.BigEndian.Uint64(r[16*i+8:]))
	}
	return m, nil
}

// storeBatchBytes bounds one batch the service writes to the store, well
// under the store topic's max.message.bytes (1 MiB by default).
const storeBatchBytes = 512 << 10

// buildStore encodes records for the store as one or more uncompressed
// batches of at most about storeBatchBytes each, in order: a crash that
// cuts the log's tail keeps a prefix of them.
func buildStore(now int64, recs []kmsg.Record) ([]byte, error) {
	return buildStoreAs(now, recs, noProducer), nil
}

// storeProducer is the producer of a store batch: none for the service's
// own records; a client's transactional producer for the entries it held
// in a transaction (txn.go), whose sequence is set when appended.
type storeProducer struct {
	id    int64
	epoch int16
}

var noProducer = storeProducer{id: -1, epoch: -1}

// buildStoreAs is buildStore for producer pr.
func buildStoreAs(now int64, recs []kmsg.Record, pr storeProducer) []byte {
	var out []byte
	for len(recs) > 0 {
		n, size := 0, 0
		for n < len(recs) && (n == 0 || size+len(recs[n].Key)+len(recs[n].Value)+40 <= storeBatchBytes) {
			size += len(recs[n].Key) + len(recs[n].Value) + 40
			n++
		}
		out = appendStoreBatch(out, now, recs[:n], pr)
		recs = recs[n:]
	}
	return out
}

// appendStoreBatch appends to b one uncompressed v2 batch of recs (keys,
// values, headers, timestamp now, producer pr): what batch.Build makes,
// encoded in one allocation. Held records cost this once each, so it is on
// the produce path. A transactional producer's batch gets base sequence 0
// here and its real one when appended (setSequence).
func appendStoreBatch(b []byte, now int64, recs []kmsg.Record, pr storeProducer) []byte {
	size := batch.HeaderSize
	for i := range recs {
		l := recordBodyLen(int64(i), &recs[i])
		size += varintLen(int64(l)) + l
	}
	start := len(b)
	b = slices.Grow(b, size)
	b = b[:start+batch.HeaderSize]
	putStoreHeader(b[start:], size, len(recs), now, pr)
	for i := range recs {
		b = binary.AppendVarint(b, int64(recordBodyLen(int64(i), &recs[i])))
		b = append(b, 0)                     // attributes
		b = binary.AppendVarint(b, 0)        // timestamp delta
		b = binary.AppendVarint(b, int64(i)) // offset delta
		b = appendBytes(b, recs[i].Key)
		b = appendBytes(b, recs[i].Value)
		b = binary.AppendVarint(b, int64(len(recs[i].Headers)))
		for _, h := range recs[i].Headers {
			b = appendBytes(b, []byte(h.Key))
			b = appendBytes(b, h.Value)
		}
	}
	binary.BigEndian.PutUint32(b[start+batch.OffCRC:], batch.ComputeCRC(b[start:]))
	return b
}

func recordBodyLen(delta int64, r *kmsg.Record) int {
	n := 1 + 1 + varintLen(delta) + bytesLen(r.Key) + bytesLen(r.Value) + varintLen(int64(len(r.Headers)))
	for _, h := range r.Headers {
		n += bytesLen([]byte(h.Key)) + bytesLen(h.Value)
	}
	return n
}

func bytesLen(v []byte) int {
	if v == nil {
		return 1
	}
	return varintLen(int64(len(v))) + len(v)
}

func varintLen(v int64) int {
	var buf [binary.MaxVarintLen64]byte
	return binary.PutVarint(buf[:], v)
}

// entryLen is the size of e's value (AppendEntry).
func entryLen(e *Entry) int {
	n := 17 + bytesLen(e.Key) + bytesLen(e.Value) + varintLen(int64(len(e.Headers)))
	for _, h := range e.Headers {
		n += bytesLen([]byte(h.Key)) + bytesLen(h.Value)
	}
	return n
}

// putStoreHeader writes the v2 batch header of a store batch of size bytes
// holding n records, timestamp now, producer pr (CRC left to the caller).
func putStoreHeader(h []byte, size, n int, now int64, pr storeProducer) {
	binary.BigEndian.PutUint64(h[batch.OffBaseOffset:], 0)
	binary.BigEndian.PutUint32(h[batch.OffLength:], uint32(size-batch.LogOverhead))
	binary.BigEndian.PutUint32(h[batch.OffLeaderEpoch:], 0xffffffff)
	h[batch.OffMagic] = 2
	attrs, seq := uint16(0), uint32(0xffffffff)
	if pr.id >= 0 {
		attrs, seq = batch.AttrTransactional, 0
	}
	binary.BigEndian.PutUint16(h[batch.OffAttributes:], attrs)
	binary.BigEndian.PutUint32(h[batch.OffLastOffsetDelta:], uint32(n-1))
	binary.BigEndian.PutUint64(h[batch.OffFirstTimestamp:], uint64(now))
	binary.BigEndian.PutUint64(h[batch.OffMaxTimestamp:], uint64(now))
	binary.BigEndian.PutUint64(h[batch.OffProducerID:], uint64(pr.id))
	binary.BigEndian.PutUint16(h[batch.OffProducerEpoch:], uint16(pr.epoch))
	binary.BigEndian.PutUint32(h[batch.OffBaseSequence:], seq)
	binary.BigEndian.PutUint32(h[batch.OffRecordCount:], uint32(n))
}
