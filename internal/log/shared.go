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
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/segment"
	"github.com/sluice-mq/sluice/internal/log/wal"
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
	// MaxPartitionsPerObject bounds the partitions one flush or merged
	// object holds (default 64). Each partition adds Fence's compares
	// (two) to the registration Txn, and etcd allows meta.MaxTxnOps (128)
	// by default; objects are also split to stay within that.
	MaxPartitionsPerObject int
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
	// SnapshotInterval is how often dirty producer state is snapshotted
	// (default 10 s). A new leader replays the partition from its snapshot.
	SnapshotInterval time.Duration
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
	cmps, cur, ok := e.cfg.Shared.Fence(topicName, partition)
	if !ok || cur != epoch {
		return fmt.Errorf("%w: %s-%d", ErrNotLeader, topicName, partition)
	}
	id := p.t.id
	began := time.Now()

	var ls int64
	if kv, err := e.md.Get(ctx, pstateKey(id, partition)); err == nil {
		if ls, err = strconv.ParseInt(string(kv.Value), 10, 64); err != nil {
			return fmt.Errorf("%w: log start %s-%d: %v", ErrStorage, topicName, partition, err)
		}
	} else if !errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("%w: log start: %v", ErrStorage, err)
	}
	exts, err := e.loadPartitionExtents(ctx, id, partition, ls)
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
	if kv, err := e.md.Get(ctx, producersKey(id, partition)); err == nil {
		if upTo, ps, ts, err = decodeProducers(kv.Value); err != nil {
			return fmt.Errorf("%w: producer state %s-%d: %v", ErrStorage, topicName, partition, err)
		}
	} else if !errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("%w: producer state: %v", ErrStorage, err)
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
		data, _, err := e.readExtents(ctx, exts, from, 16<<20, true)
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
	if kv, err := e.md.Get(ctx, epochsKey(id, partition)); err == nil {
		if hist, err = decodeEpochs(kv.Value); err != nil {
			return fmt.Errorf("%w: epoch history %s-%d: %v", ErrStorage, topicName, partition, err)
		}
		histVer = kv.Version
	} else if !errors.Is(err, meta.ErrNotFound) {
		return fmt.Errorf("%w: epoch history: %v", ErrStorage, err)
	}
	for len(hist) > 0 && hist[len(hist)-1].start >= next && hist[len(hist)-1].epoch < epoch {
		hist = hist[:len(hist)-1] // epochs that never wrote anything
	}
	hist = append(hist, epochEntry{epoch, next})
	if len(hist) > maxEpochHistory {
		hist = hist[len(hist)-maxEpochHistory:]
	}
	if err := e.md.Txn(ctx, append(cmps, meta.Compare{Key: epochsKey(id, partition), Version: histVer}),
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
	p.wake(false)
	e.log.Info("partition released", "topic", topicName, "partition", partition, "fenced", fenced)
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
// partition, sorted by offset, from a listing of the object records that
// began after the call did.
func (e *Engine) loadPartitionExtents(ctx context.Context, id [16]byte, partition int32, ls int64) ([]*extent, error) {
	l, err := e.objectListing(ctx)
	if err != nil {
		return nil, err
	}
	var xs []*extent
	for _, r := range l.byPart[partKey{id, partition}] {
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
	done   chan struct{}
	byPart map[partKey][]listedExtent
	err    error
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
			e.listMu.Unlock()
			return
		}
		e.listMu.Unlock()
		l.byPart, l.err = e.listObjectRecords(e.ctx)
		close(l.done)
	}
}

func (e *Engine) listObjectRecords(ctx context.Context) (map[partKey][]listedExtent, error) {
	kvs, err := e.md.List(ctx, keyObjects)
	if err != nil {
		return nil, fmt.Errorf("%w: list objects: %v", ErrStorage, err)
	}
	byPart := map[partKey][]listedExtent{}
	for _, kv := range kvs {
		key := strings.TrimPrefix(kv.Key, keyObjects)
		rec, err := decodeObject(kv.Value)
		if err != nil {
			return nil, fmt.Errorf("%w: object record %s: %v", ErrStorage, key, err)
		}
		for _, x := range rec.Extents {
			k := partKey{x.TopicID, x.Partition}
			byPart[k] = append(byPart[k], listedExtent{key: key, rec: rec, x: x})
		}
	}
	return byPart, nil
}

// liveExtents drops the extents of one partition that a newer object
// (higher gen) covers wholly, and sorts the rest by offset: an extent
// superseded by compaction or a merge is dead.
func liveExtents(xs []*extent) []*extent {
	sort.Slice(xs, func(i, j int) bool { return xs[i].obj.gen > xs[j].obj.gen })
	var keep []*extent
	for _, x := range xs {
		covered := false
		for _, k := range keep {
			if k.Base <= x.Base && k.Last >= x.Last {
				covered = true
				break
			}
		}
		if !covered {
			keep = append(keep, x)
		}
	}
	sortExtents(keep)
	return keep
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

// flushRun is one partition's batches in a flush.
type flushRun struct {
	p       *Partition
	epoch   int32
	loadSeq uint64
	batches [][]byte
	bytes   int
	last    int64
}

// flushSharedAsync is the WAL sink in shared mode. In the writer goroutine
// it turns one group commit into objects, and starts their PUTs (retrying
// storage outages until the engine closes); the registration goroutine
// registers stored objects in order under the leadership compares and
// settles the group. The writer waits for the PUTs only up to the hedge
// delay: a group behind a slow PUT is built and PUT alongside it instead
// of after it. Only a lost leadership fails a partition's part of a group
// (Append sees that through loadSeq and answers NOT_LEADER_OR_FOLLOWER).
func (e *Engine) flushSharedAsync(bufs [][]byte, _ []wal.Item, settle func(error)) {
	start := time.Now()
	runs := e.flushRuns(bufs)
	sort.Slice(runs, func(i, j int) bool {
		a, b := runs[i].p, runs[j].p
		if c := bytes.Compare(a.t.id[:], b.t.id[:]); c != 0 {
			return c < 0
		}
		return a.id < b.id
	})
	job := &regJob{settle: settle, start: start, ready: make(chan struct{})}
	var bodies [][]byte
	for len(runs) > 0 && job.err == nil {
		var o *pendingObject
		var body []byte
		if o, body, runs, job.err = e.buildObject(runs); o != nil {
			job.objs = append(job.objs, o)
			bodies = append(bodies, body)
		}
	}
	go func() {
		defer close(job.ready)
		if job.err != nil {
			return
		}
		errs := make([]error, len(job.objs))
		var wg sync.WaitGroup
		for i, o := range job.objs {
			wg.Go(func() { errs[i] = e.putObject(o, bodies[i]) })
		}
		wg.Wait()
		job.err = errors.Join(errs...)
	}()
	e.regCh <- job
	wait, ok := e.putTimes.hedgeAfter()
	if !ok {
		<-job.ready
		return
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-job.ready:
	case <-t.C:
	}
}

// flushRuns splits a group's entries into per-partition runs, leaving out
// partitions released or re-acquired since the append.
func (e *Engine) flushRuns(bufs [][]byte) []*flushRun {
	var runs []*flushRun
	byP := map[*Partition]*flushRun{}
	for _, buf := range bufs {
		for len(buf) > 0 {
			ent, n, err := wal.DecodeHeader(buf)
			if err != nil {
				// Only zero-length barrier reservations leave gaps; they
				// are never in the middle of a buffer with data after.
				break
			}
			buf = buf[n:]
			p := e.partitionByID(ent.TopicID, ent.Partition)
			if p == nil {
				continue
			}
			r := byP[p]
			if r == nil {
				p.mu.RLock()
				ok := p.led && batch.LeaderEpoch(ent.Batch) == p.epoch
				seq := p.loadSeq
				p.mu.RUnlock()
				r = &flushRun{p: p, epoch: batch.LeaderEpoch(ent.Batch), loadSeq: seq}
				byP[p] = r
				if !ok {
					r.p = nil // fenced or released since the append
				} else {
					runs = append(runs, r)
				}
			}
			if r.p == nil {
				continue
			}
			r.batches = append(r.batches, ent.Batch)
			r.bytes += len(ent.Batch)
			r.last = batch.LastOffset(ent.Batch)
		}
	}
	return runs
}

// pendingObject is a flush object stored but not yet registered.
type pendingObject struct {
	runs     []*flushRun
	cmps     [][]meta.Compare // per run
	exts     []segment.Extent // per run
	key      string
	gen      uint64
	size     int64
	deadline time.Time // register by then or give up (orphan grace)
}

// regJob is one group for the registration goroutine.
type regJob struct {
	ready  chan struct{} // closed once objs are stored or err is set
	objs   []*pendingObject
	err    error // storing failed: the engine is closing
	settle func(error)
	start  time.Time // handed to the sink
}

// registerLoop registers stored flush objects in order and settles their
// groups. It ends when regCh is closed (engine Close, after the WAL).
//
// Groups that queued up while a registration ran (a slow etcd round trip)
// are registered together, in one Txn where their compares allow: the
// queue drains in one round trip instead of one per group. A group whose
// objects are still being stored ends the batch and starts the next one.
func (e *Engine) registerLoop() {
	defer close(e.regDone)
	var next *regJob
	for {
		job := next
		if job == nil {
			var ok bool
			if job, ok = <-e.regCh; !ok {
				return
			}
		}
		next = nil
		<-job.ready
		jobs := []*regJob{job}
	more:
		for len(jobs) < maxRegisterJobs {
			select {
			case j, ok := <-e.regCh:
				if !ok {
					break more
				}
				select {
				case <-j.ready:
					jobs = append(jobs, j)
				default:
					next = j
					break more
				}
			default:
				break more
			}
		}
		e.registerJobs(jobs)
	}
}

// maxRegisterJobs bounds the groups registered in one pass.
const maxRegisterJobs = 32

// registerJobs registers the objects of jobs in order, in as few Txns as
// the compares allow, and settles each job. Registration fails only when
// the engine is closing: that job and every later one fail (some of their
// objects may be registered; clients retry, idempotent ones without
// effect).
func (e *Engine) registerJobs(jobs []*regJob) {
	var objs []*pendingObject
	var owner []int // job index of each object
	failFrom, failErr := len(jobs), error(nil)
	for i, job := range jobs {
		if job.err != nil {
			failFrom, failErr = i, job.err
			break
		}
		for _, o := range job.objs {
			objs = append(objs, o)
			owner = append(owner, i)
		}
	}
	for k := 0; k < len(objs); {
		t := time.Now()
		n := e.registerTogether(objs[k:])
		if n == 0 {
			if err := e.registerObject(objs[k]); err != nil {
				failFrom, failErr = owner[k], err
				break
			}
			n = 1
		}
		d := time.Since(t).Seconds()
		for range n {
			e.m.sharedRegisterSeconds.Observe(d)
		}
		k += n
	}
	for i, job := range jobs {
		var err error
		if i >= failFrom {
			err = failErr
		}
		job.settle(err)
		e.m.sharedGroupSeconds.Observe(time.Since(job.start).Seconds())
	}
}

// registerTogether registers the leading objects of objs in one Txn, if at
// least two can go together: every run of each still current (no
// partition released or re-acquired since it was stored), compares that
// agree where partitions repeat, all within meta.MaxTxnOps and the objects'
// deadlines. It returns how many it registered; 0 leaves objs[0] to
// registerObject, which handles fencing one object at a time.
func (e *Engine) registerTogether(objs []*pendingObject) int {
	var cmps []meta.Compare
	var ops []meta.Op
	var recs []*objectRecord
	seen := map[string]int64{}
	deadline := time.Time{}
	now := time.Now()
	for _, o := range objs {
		if len(ops) == meta.MaxTxnOps || now.After(o.deadline) {
			break
		}
		var add []meta.Compare
		fits := true
		for j, r := range o.runs {
			r.p.mu.RLock()
			current := r.p.loadSeq == r.loadSeq
			r.p.mu.RUnlock()
			if !current {
				fits = false
				break
			}
			for _, c := range o.cmps[j] {
				if v, dup := seen[c.Key]; dup {
					if v != c.Version {
						fits = false
					}
					continue
				}
				add = append(add, c)
			}
		}
		if !fits || len(cmps)+len(add) > meta.MaxTxnOps {
			break
		}
		for _, c := range add {
			seen[c.Key] = c.Version
		}
		cmps = append(cmps, add...)
		rec := &objectRecord{Gen: o.gen, WALSeq: walSeqFlush, Size: o.size, Extents: o.exts}
		recs = append(recs, rec)
		ops = append(ops, meta.Put(keyObjects+o.key, encodeObject(rec)))
		if deadline.IsZero() || o.deadline.Before(deadline) {
			deadline = o.deadline
		}
	}
	n := len(recs)
	if n < 2 {
		return 0
	}
	var conflict, expired bool
	e.retry(fmt.Sprintf("register %d objects from %s", n, objs[0].key), func() error {
		if time.Now().After(deadline) {
			expired = true
			return nil
		}
		err := e.md.Txn(e.ctx, cmps, ops...)
		if isConflict(err) {
			conflict = true
			return nil
		}
		return err
	})
	if conflict || expired || e.ctx.Err() != nil {
		return 0 // nothing registered; registerObject takes it from here
	}
	e.m.sharedRegisterTxns.Inc()
	e.m.sharedRegistered.Add(float64(n))
	for i, o := range objs[:n] {
		all := make([]int, len(o.runs))
		for j := range all {
			all[j] = j
		}
		e.applyRegistered(o, recs[i], all)
	}
	return n
}

// buildObject builds one object for the runs at the front of runs whose
// leadership holds, as many as one registration Txn can compare
// (MaxPartitionsPerObject partitions, meta.MaxTxnOps compares), gives it a
// key, and returns it with its bytes and the runs left for the next
// object. The object is nil (with no error) when no leadership held.
func (e *Engine) buildObject(runs []*flushRun) (*pendingObject, []byte, []*flushRun, error) {
	o := &pendingObject{deadline: time.Now().Add(e.cfg.Shared.OrphanGrace / 2)}
	ncmp := 0
	for len(runs) > 0 && len(o.runs) < e.cfg.Shared.MaxPartitionsPerObject {
		r := runs[0]
		c, ep, ok := e.cfg.Shared.Fence(r.p.t.name, r.p.id)
		if ok && ep == r.epoch && len(o.runs) > 0 && ncmp+len(c) > meta.MaxTxnOps {
			break // the next object's
		}
		runs = runs[1:]
		if !ok || ep != r.epoch {
			// Released, or released and acquired again at a new epoch
			// (whose state was rebuilt without these batches): they
			// must not be registered. Their appends see loadSeq moved.
			if !ok {
				e.fence(r.p)
			}
			continue
		}
		o.cmps = append(o.cmps, c)
		o.runs = append(o.runs, r)
		ncmp += len(c)
	}
	if len(o.runs) == 0 {
		return nil, nil, runs, nil
	}
	size := 0
	for _, r := range o.runs {
		size += r.bytes
	}
	b := segment.NewBuilderSize(0, size, len(o.runs))
	for _, r := range o.runs {
		b.StartExtent(r.p.t.id, r.p.id, batch.BaseOffset(r.batches[0]))
		for _, bt := range r.batches {
			b.AddBatch(bt)
		}
		b.EndExtent(r.last)
	}
	body, exts := b.Finish()
	o.exts, o.size = exts, int64(len(body))
	var keyErr error
	e.retry("allocate object key", func() error {
		o.key, o.gen, keyErr = e.nextObjectKey(e.ctx)
		return keyErr
	})
	if keyErr != nil {
		return nil, nil, runs, fmt.Errorf("%w: flush not stored before the engine closed", ErrClosed)
	}
	return o, body, runs, nil
}

// putObject stores o's bytes, hedged, retrying until the engine closes.
func (e *Engine) putObject(o *pendingObject, body []byte) error {
	start := time.Now()
	var putErr error
	e.retry("put "+o.key, func() error {
		putErr = e.putHedged(e.ctx, o.key, body)
		return putErr
	})
	if putErr != nil {
		return fmt.Errorf("%w: flush not stored before the engine closed", ErrClosed)
	}
	e.m.objectBytes.Add(float64(len(body)))
	e.m.sharedPutSeconds.Observe(time.Since(start).Seconds())
	return nil
}

// registerObject registers o for the runs whose leadership still holds. A
// compare that fails drops the runs whose leadership this broker now knows
// is gone, and the rest are registered without them (their bytes stay in
// the object as dead data). Runs whose partition was released or acquired
// again since the object was built are left out: a later group must never
// be registered past an earlier one that was dropped.
func (e *Engine) registerObject(o *pendingObject) error {
	keep := make([]bool, len(o.runs))
	for j, r := range o.runs {
		r.p.mu.RLock()
		keep[j] = r.p.loadSeq == r.loadSeq
		r.p.mu.RUnlock()
	}
	var rec objectRecord
	var kept []int
	for {
		var all []meta.Compare
		rec = objectRecord{Gen: o.gen, WALSeq: walSeqFlush, Size: o.size}
		kept = kept[:0]
		for j := range o.runs {
			if keep[j] {
				all = append(all, o.cmps[j]...)
				rec.Extents = append(rec.Extents, o.exts[j])
				kept = append(kept, j)
			}
		}
		if len(kept) == 0 {
			return nil // all fenced; the object is garbage
		}
		var conflict, expired bool
		e.retry("register "+o.key, func() error {
			if time.Now().After(o.deadline) {
				expired = true
				return nil
			}
			err := e.md.Txn(e.ctx, all, meta.Put(keyObjects+o.key, encodeObject(&rec)))
			if isConflict(err) {
				conflict = true
				return nil
			}
			return err
		})
		if e.ctx.Err() != nil {
			return fmt.Errorf("%w: flush not registered before the engine closed", ErrClosed)
		}
		if !conflict && !expired {
			break
		}
		dropped := false
		if conflict {
			for _, j := range kept {
				r := o.runs[j]
				c, ep, ok := e.cfg.Shared.Fence(r.p.t.name, r.p.id)
				if !ok || ep != r.epoch || !slices.Equal(c, o.cmps[j]) {
					keep[j] = false
					dropped = true
					e.fence(r.p)
				}
			}
		}
		if !dropped {
			// Out of time (the controller may soon take the object for
			// an orphan), or a compare failed that this broker's view of
			// the cluster does not explain yet: give every partition up.
			// Those still ours are acquired again at a new epoch, rebuilt
			// from what is registered.
			e.log.Warn("flush not registered; releasing its partitions", "object", o.key,
				"partitions", len(kept), "timed_out", expired)
			for _, j := range kept {
				e.fence(o.runs[j].p)
			}
			return nil
		}
	}
	e.m.sharedRegisterTxns.Inc()
	e.m.sharedRegistered.Inc()
	e.applyRegistered(o, &rec, kept)
	return nil
}

// applyRegistered makes the kept runs of o, registered as rec, visible:
// their extents join the partitions, their producer state folds into the
// snapshot state, and the high watermarks move past them.
func (e *Engine) applyRegistered(o *pendingObject, rec *objectRecord, kept []int) {
	obj := e.sharedObject(o.key, rec)
	kick := false
	e.snapMu.Lock()
	for _, j := range kept {
		p := o.runs[j].p
		for _, bt := range o.runs[j].batches {
			e.foldRolledShared(p, bt)
		}
		p.c().unsnapExtents++
		if e.snapshotOverdue(p) {
			if e.prodDirty == nil {
				e.prodDirty = map[*Partition]struct{}{}
			}
			e.prodDirty[p] = struct{}{}
			kick = true
		}
	}
	e.snapMu.Unlock()
	if kick {
		select {
		case e.snapKick <- struct{}{}:
		default:
		}
	}
	for _, j := range kept {
		r := o.runs[j]
		x := &extent{Extent: o.exts[j], obj: obj}
		r.p.markRolled([]*extent{x}, r.last)
		r.p.advanceHW(r.last + 1)
	}
}

// retry runs fn until it succeeds or the engine closes, backing off up to
// 250 ms. Storage and meta outages are waited out: appends stay pending
// meanwhile, and clients see request timeouts, which they retry. The short
// cap is what lets produce resume within moments of the store coming back
// (an etcd outage stalls produce for the outage plus at most 2 s); an
// attempt against a store that is down costs one failed request.
func (e *Engine) retry(what string, fn func() error) {
	backoff := 50 * time.Millisecond
	for {
		err := fn()
		if err == nil || e.ctx.Err() != nil {
			return
		}
		e.log.Warn("cluster flush step failed; retrying", "step", what, "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-e.ctx.Done():
			return
		}
		backoff = min(2*backoff, 250*time.Millisecond)
	}
}

// fence releases p after its leadership was found gone, and tells the
// cluster layer.
func (e *Engine) fence(p *Partition) {
	e.Release(p.t.name, p.id, true)
	if e.cfg.Shared.OnFenced != nil {
		e.cfg.Shared.OnFenced(p.t.name, p.id)
	}
}

// foldRolledShared folds a registered batch into p's snapshot state. Every
// batch, with a producer or not, moves the state's upTo, so a take-over
// replays only what was registered after the snapshot. snapMu held.
func (e *Engine) foldRolledShared(p *Partition, bt []byte) {
	e.foldRolled(p, bt)
	c := p.c()
	if last := batch.LastOffset(bt) + 1; last > c.rolledUpTo {
		c.rolledUpTo = last
	}
	c.unsnapBytes += int64(len(bt))
}

// snapshotExtents bounds the flush extents registered between two
// snapshots of a partition: a take-over reads each of them (one GET each),
// and a partition written a record at a time registers one per flush, so
// bytes alone would let hundreds pile up.
const snapshotExtents = 64

// snapshotOverdue: p has SnapshotBytes or snapshotExtents registered since
// its last snapshot, which the snapshot loop then writes at once. snapMu
// held.
func (e *Engine) snapshotOverdue(p *Partition) bool {
	c := p.cr()
	return c.unsnapBytes >= e.cfg.Shared.SnapshotBytes || c.unsnapExtents >= snapshotExtents
}

// snapshotRequest writes p's producer snapshot now (hand-off).
func (e *Engine) snapshotRequest(p *Partition) {
	e.snapWriteMu.Lock()
	defer e.snapWriteMu.Unlock()
	e.snapMu.Lock()
	if c := p.cr(); c.unsnapBytes > 0 || c.unsnapExtents > 0 {
		// Whatever was registered since: the next leader replays nothing.
		if e.prodDirty == nil {
			e.prodDirty = map[*Partition]struct{}{}
		}
		e.prodDirty[p] = struct{}{}
	}
	s, ok := e.encodeSnapshotLocked(p)
	e.snapMu.Unlock()
	if ok {
		e.writeSnapshots([]prodSnap{s})
	}
}

// snapshotLoop writes the producer snapshots of dirty partitions every
// SnapshotInterval, off the flush path: a flush never waits for them.
func (e *Engine) snapshotLoop() {
	defer e.bg.Done()
	t := time.NewTicker(e.cfg.Shared.SnapshotInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.snapshotDirty(false)
		case <-e.snapKick:
			e.snapshotDirty(true)
		case <-e.ctx.Done():
			return
		}
	}
}

// prodSnap is one partition's encoded producer snapshot with the compares
// that guard writing it.
type prodSnap struct {
	p    *Partition
	cmps []meta.Compare
	val  []byte
}

// snapshotTxnBytes bounds the snapshot values written in one Txn, well
// under etcd's default request limit (1.5 MiB).
const snapshotTxnBytes = 512 << 10

// snapshotDirty writes the snapshot of every partition whose registered
// producer state changed since its last one, many partitions per Txn. The
// state is encoded under snapMu and written after it is released, so
// registrations (which fold into that state) never wait for etcd here.
//
// With bigOnly (a kick from a registration) only partitions past
// SnapshotBytes are written; the others wait for the interval.
func (e *Engine) snapshotDirty(bigOnly bool) {
	e.snapWriteMu.Lock()
	defer e.snapWriteMu.Unlock()
	e.snapMu.Lock()
	var snaps []prodSnap
	for p := range e.prodDirty {
		if bigOnly && !e.snapshotOverdue(p) {
			continue
		}
		if s, ok := e.encodeSnapshotLocked(p); ok {
			snaps = append(snaps, s)
		}
	}
	e.snapMu.Unlock()
	for len(snaps) > 0 {
		n, ncmp, size := 0, 0, 0
		for n < len(snaps) && (n == 0 || (ncmp+len(snaps[n].cmps) <= meta.MaxTxnOps && n < meta.MaxTxnOps &&
			size+len(snaps[n].val) <= snapshotTxnBytes)) {
			ncmp += len(snaps[n].cmps)
			size += len(snaps[n].val)
			n++
		}
		e.writeSnapshots(snaps[:n])
		snaps = snaps[n:]
	}
}

// encodeSnapshotLocked takes p off the dirty set and encodes its rolled
// producer state; false when p is not dirty or no longer led. snapMu held.
func (e *Engine) encodeSnapshotLocked(p *Partition) (prodSnap, bool) {
	if _, dirty := e.prodDirty[p]; !dirty {
		return prodSnap{}, false
	}
	delete(e.prodDirty, p)
	c := p.c()
	c.unsnapBytes, c.unsnapExtents = 0, 0
	cmps, _, ok := e.cfg.Shared.Fence(p.t.name, p.id)
	if !ok {
		return prodSnap{}, false
	}
	c.rolledProducers.expire(e.producerCutoff())
	c.rolledTxns.truncate(p.logStart.Load())
	return prodSnap{p: p, cmps: cmps, val: encodeProducers(c.rolledUpTo, c.rolledProducers, &c.rolledTxns)}, true
}

// writeSnapshots writes snaps in one Txn under all their compares. When a
// compare fails (one partition moved), each is written on its own so the
// others still land. Other failures mark them dirty for the next pass.
// snapWriteMu held, so snapshots of a partition land in the order encoded.
func (e *Engine) writeSnapshots(snaps []prodSnap) {
	var cmps []meta.Compare
	ops := make([]meta.Op, 0, len(snaps))
	for _, s := range snaps {
		cmps = append(cmps, s.cmps...)
		ops = append(ops, meta.Put(producersKey(s.p.t.id, s.p.id), s.val))
	}
	err := e.md.Txn(e.ctx, cmps, ops...)
	switch {
	case err == nil:
	case isConflict(err) && len(snaps) > 1:
		for i := range snaps {
			e.writeSnapshots(snaps[i : i+1])
		}
	case isConflict(err):
		// Leadership gone: the next leader rebuilds from what is registered.
	default:
		e.log.Warn("producer snapshot failed; next pass retries", "partitions", len(snaps), "err", err)
		e.snapMu.Lock()
		for _, s := range snaps {
			e.prodDirty[s.p] = struct{}{}
		}
		e.snapMu.Unlock()
	}
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
		e.topicsChanged()
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
