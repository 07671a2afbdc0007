package log

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/meta"
)

// Meta key layout (docs/formats.md):
//
//	log/topics/<name>                      topicRecord (JSON)
//	log/pstate/<topic id hex>/<%010d part> partition log start offset (decimal)
//	log/objects/<object key>               objectRecord (binary)
//	log/wal/rolled                         highest WAL segment seq fully rolled (decimal)
//	log/seq/object                         next unallocated object sequence (decimal)
//	log/seq/producer                       next unallocated producer id (decimal)
//	log/producers/<topic id hex>/<%010d part> producer state snapshot (binary, producer.go)
//	log/psnap/<seq>/<attempt>/<chunk>       single node: producer state deltas (prodsnap.go)
const (
	keyTopics     = "log/topics/"
	keyPState     = "log/pstate/"
	keyObjects    = "log/objects/"
	keyRolled     = "log/wal/rolled"
	keySeqObject  = "log/seq/object"
	keySeqProduce = "log/seq/producer"
	keyProducers  = "log/producers/"
	// objectPrefix is where data objects live in the object store.
	objectPrefix = "data/"
)

type topicRecord struct {
	ID         string `json:"id"`
	Partitions int32  `json:"partitions"`
	// ReplicationFactor is what the topic was created with; absent
	// (records written before it was kept) means 1.
	ReplicationFactor int16             `json:"replication_factor,omitempty"`
	Configs           map[string]string `json:"configs,omitempty"`
	// Assignments are the replica lists given for partitions (at creation
	// or by a reassignment), by partition; absent for the others.
	Assignments map[int32][]int32 `json:"assignments,omitempty"`
}

func encodeTopic(id [16]byte, partitions int32, rf int16, configs map[string]string, assign map[int32][]int32) []byte {
	if rf <= 1 {
		rf = 0 // the default, left out
	}
	b, _ := json.Marshal(topicRecord{ID: hex.EncodeToString(id[:]), Partitions: partitions, ReplicationFactor: rf,
		Configs: configs, Assignments: assign})
	return b
}

// maxRecordPartitions bounds the partition count a topic record may claim,
// so that a corrupt record cannot make a broker allocate without limit.
// CreateTopics and CreatePartitions stop at 100,000 per topic.
const maxRecordPartitions = 1 << 20

func decodeTopic(b []byte) (id [16]byte, rec topicRecord, err error) {
	if err = json.Unmarshal(b, &rec); err != nil {
		return id, rec, err
	}
	raw, err := hex.DecodeString(rec.ID)
	if err != nil || len(raw) != 16 {
		return id, rec, fmt.Errorf("bad topic id %q", rec.ID)
	}
	copy(id[:], raw)
	if rec.Partitions < 1 || rec.Partitions > maxRecordPartitions || rec.ReplicationFactor < 0 {
		return id, rec, fmt.Errorf("bad topic record: %d partitions, replication factor %d", rec.Partitions, rec.ReplicationFactor)
	}
	for p, rs := range rec.Assignments {
		if p < 0 || p >= rec.Partitions || len(rs) == 0 {
			return id, rec, fmt.Errorf("bad topic record: assignment of partition %d: %v", p, rs)
		}
		for _, r := range rs {
			if r < 0 {
				return id, rec, fmt.Errorf("bad topic record: assignment of partition %d: broker %d", p, r)
			}
		}
	}
	return id, rec, nil
}

func pstateKey(id [16]byte, partition int32) string {
	return fmt.Sprintf("%s%s/%010d", keyPState, hex.EncodeToString(id[:]), partition)
}

func pstatePrefix(id [16]byte) string { return keyPState + hex.EncodeToString(id[:]) + "/" }

func producersKey(id [16]byte, partition int32) string {
	return fmt.Sprintf("%s%s/%010d", keyProducers, hex.EncodeToString(id[:]), partition)
}

func producersPrefix(id [16]byte) string { return keyProducers + hex.EncodeToString(id[:]) + "/" }

func parsePStateKey(k string) (id [16]byte, partition int32, ok bool) {
	return parsePartitionKey(k, keyPState)
}

// parsePartitionKey parses "<prefix><topic id hex>/<partition>".
func parsePartitionKey(k, prefix string) (id [16]byte, partition int32, ok bool) {
	rest := strings.TrimPrefix(k, prefix)
	tid, part, found := strings.Cut(rest, "/")
	raw, err := hex.DecodeString(tid)
	if !found || err != nil || len(raw) != 16 {
		return id, 0, false
	}
	n, err := strconv.ParseInt(part, 10, 32)
	if err != nil {
		return id, 0, false
	}
	copy(id[:], raw)
	return id, int32(n), true
}

// objectRecord is what meta knows about one data object: enough to serve
// reads without opening its footer (only sparse indexes are read lazily).
//
//	version 1, 2: version:u8 gen:u64 walSeq:u64 size:u64 count:u32 extent*count (segment.AppendExtent)
//	version 3:    version:u8 gen:u64 walSeq:u64 size:u64 count:u32 tableAt:u64 tableCRC:u32
//
// version 1 is a built object (segment.Version); version 2 an adopted WAL
// segment (segment.VersionWAL: interleaved extents, dense index). Version 3
// is an adopted WAL segment whose extents are read from its own footer's
// extent table (count records at tableAt, CRC-32C tableCRC) when the
// engine opens: a segment spread over 100,000 partitions then adds 37
// bytes to meta, not 8 MB, and the meta store's file stays small.
//
// gen orders objects: on overlap the newer object's extent wins (that is how
// a compacted extent replaces the ones it was built from). walSeq is the WAL
// segment the object was rolled from, 0 for compaction output, and the
// largest of its inputs' for a merged object (merge.go).
type objectRecord struct {
	Gen     uint64
	WALSeq  uint64
	Size    int64
	Extents []segment.Extent
	WAL     bool // adopted WAL segment (record version 2 or 3)
	// TableAt > 0: version 3; Extents are in the object (Count of them,
	// CRC TableCRC), loaded by loadExtentTable.
	TableAt  int64
	TableCRC uint32
	Count    int
}

func encodeObject(r *objectRecord) []byte {
	if r.TableAt > 0 {
		b := make([]byte, 0, 41)
		b = append(b, 3)
		b = binary.BigEndian.AppendUint64(b, r.Gen)
		b = binary.BigEndian.AppendUint64(b, r.WALSeq)
		b = binary.BigEndian.AppendUint64(b, uint64(r.Size))
		b = binary.BigEndian.AppendUint32(b, uint32(r.Count))
		b = binary.BigEndian.AppendUint64(b, uint64(r.TableAt))
		return binary.BigEndian.AppendUint32(b, r.TableCRC)
	}
	b := make([]byte, 0, 29+len(r.Extents)*segment.ExtentSize)
	if r.WAL {
		b = append(b, 2)
	} else {
		b = append(b, 1)
	}
	b = binary.BigEndian.AppendUint64(b, r.Gen)
	b = binary.BigEndian.AppendUint64(b, r.WALSeq)
	b = binary.BigEndian.AppendUint64(b, uint64(r.Size))
	b = binary.BigEndian.AppendUint32(b, uint32(len(r.Extents)))
	for i := range r.Extents {
		b = segment.AppendExtent(b, &r.Extents[i])
	}
	return b
}

var errBadObjectRecord = errors.New("log: malformed object record")

func decodeObject(b []byte) (*objectRecord, error) {
	if len(b) < 29 || b[0] < 1 || b[0] > 3 {
		return nil, errBadObjectRecord
	}
	r := &objectRecord{Gen: binary.BigEndian.Uint64(b[1:]), WALSeq: binary.BigEndian.Uint64(b[9:]),
		Size: int64(binary.BigEndian.Uint64(b[17:])), WAL: b[0] >= 2}
	n := int(binary.BigEndian.Uint32(b[25:]))
	if r.Size < 0 {
		return nil, errBadObjectRecord
	}
	if b[0] == 3 {
		if len(b) != 41 {
			return nil, errBadObjectRecord
		}
		r.Count = n
		r.TableAt = int64(binary.BigEndian.Uint64(b[29:]))
		r.TableCRC = binary.BigEndian.Uint32(b[37:])
		if r.TableAt <= 0 || int64(n) > r.Size/segment.ExtentSize || r.TableAt > r.Size-int64(n)*segment.ExtentSize {
			return nil, errBadObjectRecord
		}
		return r, nil
	}
	if len(b)-29 != n*segment.ExtentSize {
		return nil, errBadObjectRecord
	}
	exts, err := decodeExtents(b[29:], n, r.Size)
	if err != nil {
		return nil, err
	}
	r.Extents = exts
	return r, nil
}

// decodeExtents decodes n extent records of an object of size bytes,
// checking that each lies inside it.
func decodeExtents(b []byte, n int, size int64) ([]segment.Extent, error) {
	exts := make([]segment.Extent, n)
	for i := range exts {
		e := segment.DecodeExtent(b[i*segment.ExtentSize:])
		if e.Pos < 0 || e.Size < 0 || e.Pos+e.Size > size || e.Last < e.Base-1 {
			return nil, errBadObjectRecord
		}
		exts[i] = e
	}
	return exts, nil
}

// loadExtentTable reads a version 3 record's extents from its object.
func (e *Engine) loadExtentTable(ctx context.Context, key string, r *objectRecord) error {
	if r.TableAt == 0 || r.Extents != nil {
		return nil
	}
	buf := make([]byte, r.Count*segment.ExtentSize)
	if err := e.store.ReadAt(ctx, key, buf, r.TableAt); err != nil {
		return fmt.Errorf("read the extent table of %s: %w", key, err)
	}
	if crc32.Checksum(buf, batch.Castagnoli) != r.TableCRC {
		return fmt.Errorf("the extent table of %s does not match its record (crc)", key)
	}
	exts, err := decodeExtents(buf, r.Count, r.Size)
	if err != nil {
		return fmt.Errorf("the extent table of %s: %w", key, err)
	}
	r.Extents = exts
	return nil
}

// allocBlock reserves [start, start+n) from the counter at key, atomically.
func allocBlock(ctx context.Context, md meta.Store, key string, n int64) (int64, error) {
	for {
		var cur, ver int64
		kv, err := md.Get(ctx, key)
		switch {
		case err == nil:
			cur, err = strconv.ParseInt(string(kv.Value), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("%w: counter %s: %v", ErrStorage, key, err)
			}
			ver = kv.Version
		case errors.Is(err, meta.ErrNotFound):
		default:
			return 0, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		err = md.Txn(ctx, []meta.Compare{{Key: key, Version: ver}}, meta.Put(key, []byte(strconv.FormatInt(cur+n, 10))))
		if errors.Is(err, meta.ErrConflict) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		return cur, nil
	}
}

// newUUID returns a random (version 4) UUID.
func newUUID() [16]byte {
	var id [16]byte
	for {
		_, _ = rand.Read(id[:])
		id[6] = id[6]&0x0f | 0x40
		id[8] = id[8]&0x3f | 0x80
		if id != ([16]byte{}) {
			return id
		}
	}
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
