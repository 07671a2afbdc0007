package log

// Shared mode (cluster mode): several brokers run an Engine each over the
// same object store and meta store. Differences from single node:
//
//   - There is no local WAL. Each group commit is built into one data
//     object, PUT to the store, and registered in meta by a Txn guarded by
//     the leadership compares of every partition in it (SharedConfig.Fence),
//     so a fenced leader's late writes are never registered. acks=all is
//     answered once that Txn landed.
//   - A partition is served only by its leader. Acquire rebuilds it from
//     meta (object records, log start, producer snapshot, epoch history)
//     and the objects; Release drops it.
//   - Topics are watched, so a topic created through any broker appears on
//     all of them.
//   - Objects are never deleted by the engine that wrote them (an object
//     holds several partitions, possibly led elsewhere by now); compaction
//     is off. Both are listed as missing in docs/cluster.md.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// ErrNotLeader is returned for a partition this broker does not lead (cluster
// mode): NOT_LEADER_OR_FOLLOWER, which clients retry after a metadata refresh.
var ErrNotLeader = errors.New("log: not the leader of this partition")

// SharedConfig turns on shared (cluster) mode.
type SharedConfig struct {
	// Fence returns the compares that hold exactly while this broker leads
	// the partition at epoch (the one it acquired); ok=false if it does
	// not lead it.
	Fence func(topic string, partition int32) (cmps []meta.Compare, epoch int32, ok bool)
	// ListFloor, if set, returns a meta revision such that a listing of
	// the object records read at or after it shows every record of the
	// partition registered before this broker's leadership
	// (cluster.Node.ListingFloor); 0 when only a listing begun after the
	// claim does. Acquire then uses the records already listed when they
	// are recent enough, instead of waiting for a new listing.
	ListFloor func(topic string, partition int32) int64
	// OnFenced is told when a registration found the partition's
	// leadership gone; the engine has already released it.
	OnFenced func(topic string, partition int32)
	// LeaseValid reports whether this broker's lease is certainly still
	// held (cluster.Node.LeaseValid); nil: always. While it is false no
	// partition is served (appends and reads answer ErrNotLeader), but
	// nothing is released: appends already accepted still register if the
	// lease turns out to have survived. It is called on every request.
	LeaseValid func() bool
	// OnTopicsChanged is called (from a background goroutine) after the
	// topic watch applied a change.
	OnTopicsChanged func()
	// OnTopicChanged, if set, is called instead of OnTopicsChanged after
	// the watch applied a change to one topic (created, altered, deleted),
	// with its name: a caller keeping a per-topic view updates that topic
	// rather than every one. OnTopicsChanged is still called after a
	// fresh snapshot.
	OnTopicChanged func(name string)
	// MaxPartitionsPerObject bounds the partitions one flush or merged
	// object holds (default DefaultMaxPartitionsPerObject). The object's
	// record, 80 bytes a partition, is one etcd value. Objects are also
	// split to keep the distinct compares of their registration Txn
	// within meta.MaxTxnOps (Fence gives every partition of a broker the
	// same compare; a Fence with compares per partition gets smaller
	// objects).
	MaxPartitionsPerObject int
	// RefreshFence, if set, is called after a Txn under Fence's compares
	// failed them (conflict is its error), so that Fence reports the
	// fence's current version: a compare shared by many partitions may
	// fail although their own leaderships hold (cluster.Node.RefreshFence).
	RefreshFence func(ctx context.Context, conflict error) error
	// FlushPipeline is how many group commits may be in flight at once:
	// stored, or waiting for the ones before them to register (default 8).
	// Registrations stay in order; groups queued behind a slow one are
	// registered together.
	FlushPipeline int
	// PutHedge is how long a flush PUT may run before a second, identical
	// PUT races it (hedge.go); the WAL writer also stops waiting for it
	// then and builds the next group. 0: the recent 99th percentile PUT
	// time, at least 25 ms; hedges are limited to 5% of PUTs either way.
	// Negative: never.
	PutHedge time.Duration
	// ReadAheadBytes bounds how far ahead of a sequential reader one
	// partition's blocks are loaded into the block cache (readahead.go).
	// 0: 8 MiB or an eighth of the cache, whichever is smaller; negative:
	// no read-ahead. A cache under 8 MiB gets none.
	ReadAheadBytes int64
	// SnapshotInterval is how often dirty producer state is snapshotted
	// (default 10 s). A new leader replays the partition from its snapshot.
	SnapshotInterval time.Duration
	// SnapshotBudget bounds the partitions whose snapshots one interval
	// writes besides those past SnapshotBytes (default 1024): etcd writes
	// for snapshots then follow the write rate, not the partition count.
	SnapshotBudget int
	// SnapshotBytes bounds that replay: a partition with this many bytes
	// (or 64 flush extents) registered since its last snapshot, producer
	// batches or not, is snapshotted at once (default 4 MiB). Take-over
	// then reads at most about this much of each partition, whatever the
	// partition's size.
	SnapshotBytes int64
	// IsController reports whether this broker runs cluster-wide garbage
	// collection (sharedgc.go). nil: never.
	IsController func() bool
	// OrphanGrace is how old an unregistered object must be before the
	// controller deletes it; a flush gives up registering after half of it
	// (default 1 h).
	OrphanGrace time.Duration
}

// DefaultMaxPartitionsPerObject is SharedConfig.MaxPartitionsPerObject's
// default: a flush or merged object of that many partitions has a record
// of 160 KiB, a tenth of etcd's default request limit.
const DefaultMaxPartitionsPerObject = 2048

const keyEpochs = "log/epochs/"

func epochsKey(id [16]byte, partition int32) string {
	return fmt.Sprintf("%s%x/%010d", keyEpochs, id[:], partition)
}

func (e *Engine) shared() bool { return e.cfg.Shared != nil }

// leaseValid is SharedConfig.LeaseValid; true on a single node.
func (e *Engine) leaseValid() bool {
	return e.cfg.Shared == nil || e.cfg.Shared.LeaseValid == nil || e.cfg.Shared.LeaseValid()
}

// epochEntry starts a leader epoch at an offset (Kafka's leader epoch cache).
type epochEntry struct {
	epoch int32
	start int64
}

func encodeEpochs(es []epochEntry) []byte {
	b := make([]byte, 0, 12*len(es))
	for _, x := range es {
		b = binary.BigEndian.AppendUint32(b, uint32(x.epoch))
		b = binary.BigEndian.AppendUint64(b, uint64(x.start))
	}
	return b
}

func decodeEpochs(b []byte) ([]epochEntry, error) {
	if len(b)%12 != 0 {
		return nil, fmt.Errorf("epoch history of %d bytes", len(b))
	}
	es := make([]epochEntry, 0, len(b)/12)
	for ; len(b) > 0; b = b[12:] {
		es = append(es, epochEntry{int32(binary.BigEndian.Uint32(b)), int64(binary.BigEndian.Uint64(b[4:]))})
	}
	return es, nil
}

// maxEpochHistory bounds the stored history; older epochs answer
// OffsetForLeaderEpoch with the oldest kept entry, as after Kafka truncates
// its cache.
const maxEpochHistory = 1000

// Acquire makes this engine the leader of topic/partition at epoch,
// rebuilding the partition from shared storage. It must be called only while
// SharedConfig.Fence reports the leadership.
func (e *Engine) Acquire(ctx context.Context, topicName string, partition int32, epoch int32) error {
	if !e.shared() {
		return nil
	}
	if e.closed.Load() {
		return ErrClosed
	}
	p, err := e.Partition(topicName, partition)
	if err != nil {
		// The topic watch may lag the leadership watch: read the topic.
		if err := e.refreshTopic(ctx, topicName); err != nil {
			return err
		}
		if p, err = e.Partition(topicName, partition); err != nil {
			return err
		}
	}
	_, cur, ok := e.cfg.Shared.Fence(topicName, partition)
	if !ok || cur != epoch {
		return fmt.Errorf("%w: %s-%d", ErrNotLeader, topicName, partition)
	}
	id := p.t.id
	began := time.Now()

	// The partition's keys, read together (and with other Acquires'
	// reads): nobody else writes them while this broker holds the claim.
	keys, err := e.metaBatch.GetMany(ctx, []string{pstateKey(id, partition), producersKey(id, partition), epochsKey(id, partition)})
	if err != nil {
		return fmt.Errorf("%w: partition state: %v", ErrStorage, err)
	}
	pstateKV, producersKV, epochsKV := keys[0], keys[1], keys[2]
	var ls int64
	if pstateKV.Version > 0 {
		if ls, err = strconv.ParseInt(string(pstateKV.Value), 10, 64); err != nil {
			return fmt.Errorf("%w: log start %s-%d: %v", ErrStorage, topicName, partition, err)
		}
	}
	var floor int64
	if f := e.cfg.Shared.ListFloor; f != nil {
		floor = f(topicName, partition)
	}
	exts, err := e.loadPartitionExtents(ctx, id, partition, ls, floor)
	if err != nil {
		return err
	}
	listed := time.Since(began)
	next := ls
	if n := len(exts); n > 0 && exts[n-1].Last+1 > next {
		next = exts[n-1].Last + 1
	}

	var (
		upTo int64
		ps   producers
		ts   txnState
	)
	if producersKV.Version > 0 {
		if upTo, ps, ts, err = decodeProducers(producersKV.Value); err != nil {
			return fmt.Errorf("%w: producer state %s-%d: %v", ErrStorage, topicName, partition, err)
		}
	}
	ps.expire(e.producerCutoff())
	// Fold the producer batches registered after the snapshot. Snapshots
	// are written every SnapshotBytes, so this reads at most about that
	// much, however large the partition.
	var replayed int64
	replayedExtents := 0
	from := max(upTo, ls)
	for _, x := range exts {
		if x.Last >= from {
			replayedExtents++
		}
	}
	for from < next {
		data, _, _, err := e.readExtents(ctx, exts, from, 16<<20, true)
		if err != nil {
			return fmt.Errorf("%w: replay %s-%d from %d: %v", ErrStorage, topicName, partition, from, err)
		}
		if len(data) == 0 {
			break
		}
		for len(data) >= batch.LogOverhead {
			size, err := batch.Size(data)
			if err != nil || size > len(data) {
				break
			}
			bt := data[:size]
			if batch.BaseOffset(bt) >= upTo {
				if batch.ProducerID(bt) >= 0 {
					ps.fold(bt)
					ts.fold(bt)
				}
				upTo = batch.LastOffset(bt) + 1
			}
			replayed += int64(size)
			from = batch.LastOffset(bt) + 1
			data = data[size:]
		}
	}

	// Epoch history: this epoch starts at the log end.
	var hist []epochEntry
	var histVer int64
	if epochsKV.Version > 0 {
		if hist, err = decodeEpochs(epochsKV.Value); err != nil {
			return fmt.Errorf("%w: epoch history %s-%d: %v", ErrStorage, topicName, partition, err)
		}
		histVer = epochsKV.Version
	}
	for len(hist) > 0 && hist[len(hist)-1].start >= next && hist[len(hist)-1].epoch < epoch {
		hist = hist[:len(hist)-1] // epochs that never wrote anything
	}
	hist = append(hist, epochEntry{epoch, next})
	if len(hist) > maxEpochHistory {
		hist = hist[len(hist)-maxEpochHistory:]
	}
	if err := e.txnFenced(ctx, p, epoch, []meta.Compare{{Key: epochsKey(id, partition), Version: histVer}},
		meta.Put(epochsKey(id, partition), encodeEpochs(hist))); err != nil {
		if isConflict(err) {
			return fmt.Errorf("%w: %s-%d: leadership changed while loading", ErrNotLeader, topicName, partition)
		}
		return fmt.Errorf("%w: epoch history: %v", ErrStorage, err)
	}

	e.snapMu.Lock()
	c := p.c()
	c.unsnapBytes, c.unsnapExtents = replayed, replayedExtents
	e.snapMu.Unlock()
	p.mu.Lock()
	if p.deleted {
		p.mu.Unlock()
		return fmt.Errorf("%w: %s-%d", ErrUnknownTopicOrPartition, topicName, partition)
	}
	p.extents = exts
	p.tail = nil
	p.next = next
	p.logStart.Store(ls)
	p.hw.Store(next)
	ts.truncate(ls)
	p.producers, c.rolledProducers = ps.clone(), ps
	c.txns, c.rolledTxns = ts.clone(), ts
	c.rolledUpTo = upTo
	p.epoch, c.epochs = epoch, hist
	p.led = true
	p.loadSeq++
	p.mu.Unlock()
	p.wake(false)
	e.replayBytes.Add(replayed)
	e.replayExtents.Add(int64(replayedExtents))
	e.log.Info("partition acquired", "topic", topicName, "partition", partition, "epoch", epoch,
		"log_start", ls, "log_end", next, "extents", len(exts), "replayed_bytes", replayed, "replayed_extents", replayedExtents,
		"listing", listed.Round(time.Millisecond), "took", time.Since(began).Round(time.Millisecond))
	return nil
}

// Release stops serving topic/partition. With fenced=false (a hand-off) it
// first waits until every append already accepted is settled and snapshots
// the producer state, so the next leader starts quickly.
func (e *Engine) Release(topicName string, partition int32, fenced bool) {
	if !e.shared() {
		return
	}
	p, err := e.Partition(topicName, partition)
	if err != nil {
		return
	}
	p.mu.Lock()
	wasLed := p.led
	p.led = false
	p.mu.Unlock()
	if wasLed && !fenced && !e.closed.Load() {
		// Everything reserved before led went false is in a group that
		// settles before this barrier does.
		if res, err := e.wal.Reserve(0, nil, 0, 0); err == nil {
			res.Commit()
			select {
			case <-res.G.Durable():
			case <-time.After(30 * time.Second):
			}
		}
		e.snapshotRequest(p)
	}
	p.mu.Lock()
	p.led = false
	p.loadSeq++
	p.tail = nil
	p.extents = nil
	p.mu.Unlock()
	p.stopReadAhead()
	p.wake(false)
	// Debug: a broker stopping releases every partition it leads, and at
	// 50,000 partitions a line each, written under the handler's lock,
	// was most of the stop (the cluster logs hand-offs itself).
	e.log.Debug("partition released", "topic", topicName, "partition", partition, "fenced", fenced)
}

// recoverShared is Open's recovery in cluster mode: only the topics. Each
// partition is loaded when this broker acquires it.
func (e *Engine) recoverShared(ctx context.Context) error {
	kvs, err := e.md.List(ctx, keyTopics)
	if err != nil {
		return fmt.Errorf("%w: list topics: %v", ErrStorage, err)
	}
	for _, kv := range kvs {
		e.applyTopic(strings.TrimPrefix(kv.Key, keyTopics), kv.Value)
	}
	e.mu.RLock()
	for _, t := range e.topics {
		e.recovery.Partitions += len(t.partitions())
	}
	e.mu.RUnlock()
	return nil
}

// loadPartitionExtents returns the live, unsuperseded extents of one
// partition, sorted by offset, from a listing of the object records read
// at meta revision floor or later (sharedlist.go), or, for floor 0, begun
// after the call did.
func (e *Engine) loadPartitionExtents(ctx context.Context, id [16]byte, partition int32, ls, floor int64) ([]*extent, error) {
	idx := e.recordsAt(floor)
	if idx == nil {
		l, err := e.objectListing(ctx)
		if err != nil {
			return nil, err
		}
		idx = l.idx
	}
	var xs []*extent
	for _, r := range idx.extents(partKey{id, partition}) {
		if r.x.Last < ls {
			continue
		}
		xs = append(xs, &extent{Extent: r.x, obj: e.sharedObject(r.key, r.rec)})
	}
	return liveExtents(xs), nil
}

// partKey names a partition by topic id.
type partKey struct {
	id   [16]byte
	part int32
}

// listedExtent is one extent of a listed object record.
type listedExtent struct {
	key string
	rec *objectRecord
	x   segment.Extent
}

// objectList is one listing of every object record, decoded and indexed by
// partition, shared by the Acquires that asked for it.
type objectList struct {
	done chan struct{}
	idx  *recordIndex // sharedlist.go
	err  error
}

// objectListing returns a listing of the object records that began after
// this call did. Callers that overlap (a burst of Acquires after a broker
// fails or every session ends) share one etcd listing and one decode,
// instead of one per partition.
func (e *Engine) objectListing(ctx context.Context) (*objectList, error) {
	e.listMu.Lock()
	l := e.listNext
	if l == nil {
		l = &objectList{done: make(chan struct{})}
		e.listNext = l
		if !e.listRunning {
			e.listRunning = true
			go e.runListings()
		}
	}
	e.listMu.Unlock()
	select {
	case <-l.done:
		return l, l.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// runListings takes the waiting listing, lists, and repeats while callers
// keep asking; a caller that arrives during a listing waits for the next.
func (e *Engine) runListings() {
	for {
		e.listMu.Lock()
		l := e.listNext
		e.listNext = nil
		if l == nil {
			e.listRunning = false
			e.dropRecordIndexLocked()
			e.listMu.Unlock()
			return
		}
		e.listMu.Unlock()
		l.idx, l.err = e.listRecords(e.ctx)
		close(l.done)
	}
}

// liveExtents drops the extents of one partition that newer objects
// (higher gen) cover, and sorts the rest by offset: an extent superseded
// by compaction or a merge is dead. Their outputs cover exactly the
// ranges of the extents they replace: one output a run of whole extents,
// or, when compaction cleaned only a prefix of an extent, two outputs
// registered together that cover it between them (compact.go).
func liveExtents(xs []*extent) []*extent {
	// Newest first, so that what covers an extent is kept before it.
	sort.Slice(xs, func(i, j int) bool { return xs[i].obj.gen > xs[j].obj.gen })
	var keep []*extent
	for _, x := range xs {
		if !covered(keep, x) {
			keep = append(keep, x)
		}
	}
	sortExtents(keep)
	return keep
}

// covered says whether the extents of keep cover x's range: one of them
// wholly, or several of objects newer than x's together, without a gap.
func covered(keep []*extent, x *extent) bool {
	var parts []*extent
	for _, k := range keep {
		if k.Base <= x.Base && k.Last >= x.Last {
			return true
		}
		if k.obj.gen > x.obj.gen && k.Base <= x.Last && k.Last >= x.Base {
			parts = append(parts, k)
		}
	}
	if len(parts) < 2 {
		return false
	}
	sortExtents(parts)
	next := x.Base
	for _, k := range parts {
		if k.Base > next {
			return false
		}
		if next = max(next, k.Last+1); next > x.Last {
			return true
		}
	}
	return false
}

// sharedObject returns the in-memory object for key, adding it if new. In
// shared mode objects are not reference counted (see the file comment).
func (e *Engine) sharedObject(key string, rec *objectRecord) *object {
	e.objMu.Lock()
	defer e.objMu.Unlock()
	if o, ok := e.objects[key]; ok {
		return o
	}
	o := &object{key: key, gen: rec.Gen, walSeq: rec.WALSeq, size: rec.Size, wal: rec.WAL}
	e.objects[key] = o
	e.m.objects.Inc()
	return o
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch from the epoch history:
// the largest epoch <= epoch and the offset where the next epoch began (the
// log end for the current epoch); (-1, -1) for an epoch older than the
// history or newer than the current one.
func (p *Partition) endOffsetForEpochShared(epoch int32) (int32, int64) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	epochs := p.cr().epochs
	if epoch > p.epoch || len(epochs) == 0 {
		return -1, -1
	}
	if epoch == p.epoch {
		return p.epoch, p.next
	}
	i := sort.Search(len(epochs), func(i int) bool { return epochs[i].epoch > epoch })
	if i == 0 {
		return -1, -1
	}
	if i == len(epochs) {
		return p.epoch, p.next
	}
	return epochs[i-1].epoch, epochs[i].start
}

// watchTopics applies topic changes made through other brokers.
func (e *Engine) watchTopics() {
	defer e.bg.Done()
	w, ok := e.md.(meta.Watcher)
	if !ok {
		e.log.Error("cluster mode needs a meta store with watches; topic changes from other brokers will not be seen")
		return
	}
	meta.Follow(e.ctx, w, keyTopics, e.log, e.syncTopics, func(ev meta.WatchEvent) {
		name := strings.TrimPrefix(ev.Key, keyTopics)
		if ev.Kind == meta.WatchDelete {
			e.dropTopicLocal(name, [16]byte{}, false)
		} else {
			e.applyTopic(name, ev.Value)
		}
		if f := e.cfg.Shared.OnTopicChanged; f != nil {
			f(name)
		} else {
			e.topicsChanged()
		}
	})
}

func (e *Engine) topicsChanged() {
	if e.cfg.Shared.OnTopicsChanged != nil {
		e.cfg.Shared.OnTopicsChanged()
	}
}

// syncTopics makes the in-memory topics exactly snap.
func (e *Engine) syncTopics(snap []meta.KV) {
	seen := map[string]bool{}
	for _, kv := range snap {
		name := strings.TrimPrefix(kv.Key, keyTopics)
		seen[name] = true
		e.applyTopic(name, kv.Value)
	}
	e.mu.RLock()
	var gone []string
	for name := range e.topics {
		if !seen[name] {
			gone = append(gone, name)
		}
	}
	e.mu.RUnlock()
	for _, name := range gone {
		e.dropTopicLocal(name, [16]byte{}, false)
	}
	e.topicsChanged()
}

// refreshTopic reads one topic record from meta and applies it.
func (e *Engine) refreshTopic(ctx context.Context, name string) error {
	kv, err := e.md.Get(ctx, keyTopics+name)
	if errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("%w: %s", ErrUnknownTopicOrPartition, name)
	}
	if err != nil {
		return fmt.Errorf("%w: read topic %s: %v", ErrStorage, name, err)
	}
	e.applyTopic(name, kv.Value)
	return nil
}

// applyTopic installs or updates a topic from its meta record.
func (e *Engine) applyTopic(name string, v []byte) {
	id, rec, err := decodeTopic(v)
	if err != nil {
		e.log.Error("bad topic record in meta", "topic", name, "err", err)
		return
	}
	if rec.Configs == nil {
		rec.Configs = map[string]string{}
	}
	// Built before taking e.mu: brokerDefaults takes it too.
	cfg := topicconfig.Parse(e.brokerDefaults(), rec.Configs)
	fresh := e.newTopic(name, id, rec.ReplicationFactor, rec.Configs)
	fresh.assign = rec.Assignments
	e.addPartitions(fresh, rec.Partitions)
	e.mu.Lock()
	t, ok := e.topics[name]
	if ok && t.id != id {
		e.mu.Unlock()
		e.dropTopicLocal(name, t.id, true) // deleted and recreated
		e.mu.Lock()
		t, ok = e.topics[name]
	}
	if !ok {
		e.topics[name] = fresh
		e.byID[id] = fresh
		e.mu.Unlock()
		return
	}
	if int32(len(t.partitions())) < rec.Partitions {
		e.addPartitions(t, rec.Partitions)
	}
	t.overrides = rec.Configs
	t.assign = rec.Assignments
	t.cfg.Store(&cfg)
	e.mu.Unlock()
}

// dropTopicLocal forgets a topic deleted through another broker (meta is
// already updated). With matchID only the topic with that id is dropped.
func (e *Engine) dropTopicLocal(name string, id [16]byte, matchID bool) {
	e.mu.Lock()
	t, ok := e.topics[name]
	if !ok || (matchID && t.id != id) {
		e.mu.Unlock()
		return
	}
	delete(e.topics, name)
	delete(e.byID, t.id)
	e.mu.Unlock()
	for _, p := range t.partitions() {
		p.drop()
	}
	e.topicDeleted(name)
}
