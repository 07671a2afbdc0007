package log

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/log/wal"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/objstore"
)

// Config configures an Engine. Zero values take the defaults of DefaultConfig.
type Config struct {
	Dir             string        // directory for WAL files (data dir/wal)
	Flush           FlushMode     // default FlushEveryBatch
	FlushMessages   int64         // for FlushMessages
	FlushInterval   time.Duration // for FlushInterval; also the fsync backstop of FlushMessages (default 1s)
	WALSegmentBytes int64         // roll a WAL segment at this size (default 64 MiB)
	// WALBuffered writes WAL segments through the page cache instead of
	// with direct I/O (wal.Options.DirectIO; the default where the file
	// system takes it, which costs the kernel about a tenth of the CPU
	// per byte written and fsynced).
	WALBuffered  bool
	RollInterval time.Duration // roll WAL into objects at least this often (default 1 min)
	// MinFreeBytes refuses appends (ErrStorage, wrapping wal.ErrFull) while the WAL's file
	// system has less free space than this, and resumes them once space
	// is freed (0: the default, 128 MiB; -1: only a write that finds the
	// disk full stops appends). Single node only. The coordinators' writes
	// to internal topics and transaction markers are small and let
	// consumers drain, so they go on into the lower half of the margin,
	// the reserve, and stop only below MinFreeBytes/2.
	MinFreeBytes int64
	// FreeBytes reports the free space of the WAL's file system (nil:
	// statfs); tests substitute one.
	FreeBytes func(dir string) (int64, error)
	// BrokerDefaults are broker-level topic config defaults keyed by topic
	// config name (e.g. "retention.ms").
	BrokerDefaults         map[string]string
	RetentionCheckInterval time.Duration // default 5m, as Kafka's log.retention.check.interval.ms
	// DeleteBytesPerSec paces the deletion of dead objects (default
	// 256 MiB/s; negative: unpaced). Freeing gigabytes at once (a deleted
	// topic, a retention pass after a burst) makes the file system's next
	// journal commit slow, and the WAL's fsync waits for it.
	DeleteBytesPerSec int64
	Now               func() time.Time // nil = time.Now
	// CleanerShare bounds the share of the time the clean loop
	// (retention, producer expiry, compaction, object GC) may be busy,
	// however far behind it is: after each 10 ms of work it rests long
	// enough to keep to it, and it yields the processor between
	// partitions (default 0.5; 1: no rests). Time waiting on the disk or
	// the meta store counts as busy, so this bounds its I/O too. The
	// roller is never paced: the WAL's backpressure waits for it.
	CleanerShare float64
	// CompactBytesPerSec paces compaction's reads and writes together, as
	// Kafka's log.cleaner.io.max.bytes.per.second (default 128 MiB/s;
	// negative: unpaced).
	CompactBytesPerSec int64
	// CleanerBackoff is the pause between compaction passes, in addition
	// to the one of each retention check, until SetCleanerBackoff changes
	// it (default DefaultCleanerBackoff, Kafka's log.cleaner.backoff.ms).
	CleanerBackoff time.Duration
	// AsyncBacklogBytes bounds what AppendAsync leaves waiting for the WAL
	// writer: an append that finds more than this in the group not yet
	// taken waits until it is written, as Append does (default 64 MiB).
	// Without it, connections pipelining acks=all requests while the store
	// is slow or down would buffer without limit.
	AsyncBacklogBytes int64
	// DetectDelay makes a producer's append of records that carry a
	// delayed-delivery header fail with ErrDelayed, for the produce path
	// to hand them to internal/delay (false: such headers are ordinary).
	DetectDelay bool

	// TailBytesPerPartition is how much already-rolled data a partition
	// keeps in memory for readers near the head (default 1 MiB).
	TailBytesPerPartition int64
	// TailBytesTotal bounds that across partitions (default 256 MiB).
	// Unrolled data is always in memory regardless: it is bounded by the
	// WAL segment size times the segments not yet rolled.
	TailBytesTotal int64
	// BlockCacheBytes is the object block cache size (default 64 MiB).
	BlockCacheBytes int64
	// PackedObjectBytes: a partition with at least this much data in one
	// WAL segment gets an object of its own; smaller ones are packed
	// together (default 4 MiB).
	PackedObjectBytes int64
	// CopyRoll builds per-partition objects from closed WAL segments even
	// when the object store can adopt the files themselves
	// (objstore.Linker); by default a local store adopts them, so every
	// byte is written once.
	CopyRoll bool
	// MaxPendingSegments bounds the closed WAL segments waiting to be
	// rolled: beyond it the WAL writer stops until the roller catches up
	// (the hard stall), so appends wait rather than the backlog (memory,
	// replay time) growing without bound (default 4).
	//
	// Before that, the writer is slowed down gradually: once the unrolled
	// data (closed segments waiting plus the open one) passes half of the
	// limit, each group commit first waits as long as writing it at a
	// reduced rate would take. The rate starts far above the roller's
	// recent speed, equals it halfway from there to the limit, and falls
	// to nothing at the limit (a wait is at most 100 ms). Produce latency
	// rises, and throughput settles at the roller's, before anything
	// stops; the hard stall is left for a roller that all but stopped
	// (backpressure.go; docs/memory.md).
	MaxPendingSegments int
	// ProducerIDExpiration is Kafka's producer.id.expiration.ms: a
	// producer's idempotence state in a partition is dropped once its last
	// batch's timestamp is this old (default 24 h). A broker setting, not a
	// topic config.
	ProducerIDExpiration time.Duration
	// DecompressBudgetBytes bounds the memory of every decompression in
	// flight: produce validation of compressed batches, timestamp
	// lookups, compaction (default 256 MiB). Work past it waits.
	DecompressBudgetBytes int64
	// DecompressRatio: a batch may hold at most this many times its
	// topic's max.message.bytes once decompressed (at least 8 MiB, at most
	// the budget; default 32). A larger one is refused at produce with
	// MESSAGE_TOO_LARGE, and skipped by compaction and timestamp lookups
	// if it was stored before the limit existed.
	DecompressRatio int
	// MergeFanIn is how many adjacent small extents of one size level
	// the merge of small extents (merge.go, single node) rewrites into
	// one (default 8; -1: no merging). Each byte is rewritten about once
	// per level, log base MergeFanIn of how much a merged extent grows.
	MergeFanIn int
	// MergeObjectBytes bounds one merged object, and so the merge's
	// buffer, and the largest extent a merge makes (default 16 MiB).
	MergeObjectBytes int64
	// MergeBytesPerSec paces the merge's writes (default 128 MiB/s;
	// negative: only its duty cycle, at most half of one core).
	MergeBytesPerSec int64
	// CompactMapBytes bounds compaction's key map, as Kafka's
	// log.cleaner.dedupe.buffer.size: 24 bytes a key (a 16-byte digest
	// and an offset), filled to 90 %. A partition whose dirty range holds
	// more distinct keys is cleaned in several passes, each a prefix of
	// it (default 32 MiB, about 1.25 million keys; a pass over fewer
	// records allocates less).
	CompactMapBytes int64
	// CompactObjectBytes bounds one object compaction writes, and so its
	// output buffer: a pass writes one object per run of input extents
	// of at most this many bytes (default 16 MiB; an extent larger than
	// it is a run of its own).
	CompactObjectBytes int64
	// Shared, when set, runs the engine in cluster mode over a shared object
	// store and meta store (shared.go): Dir is unused.
	Shared *SharedConfig
}

// walErr is the failure that poisoned the WAL writer, if any.
func (e *Engine) walErr() error {
	if e.wal == nil {
		return nil
	}
	return e.wal.Err()
}

// DefaultConfig returns the defaults with WAL files in dir.
func DefaultConfig(dir string) Config {
	return Config{
		Dir:                    dir,
		Flush:                  FlushEveryBatch,
		FlushInterval:          time.Second,
		WALSegmentBytes:        64 << 20,
		MinFreeBytes:           128 << 20,
		RollInterval:           time.Minute,
		RetentionCheckInterval: 5 * time.Minute,
		DeleteBytesPerSec:      256 << 20,
		AsyncBacklogBytes:      64 << 20,
		TailBytesPerPartition:  1 << 20,
		TailBytesTotal:         256 << 20,
		BlockCacheBytes:        64 << 20,
		PackedObjectBytes:      4 << 20,
		MaxPendingSegments:     4,
		CleanerShare:           0.5,
		CompactBytesPerSec:     128 << 20,
		ProducerIDExpiration:   24 * time.Hour,
		MergeFanIn:             defaultMergeFanIn,
		MergeObjectBytes:       16 << 20,
		MergeBytesPerSec:       128 << 20,
		CompactMapBytes:        32 << 20,
		CompactObjectBytes:     16 << 20,
	}
}

// Validate reports a bad configuration, naming the field.
func (c *Config) Validate() error {
	switch {
	case c.Dir == "" && c.Shared == nil:
		return errors.New("log: Config.Dir is required")
	case c.Shared != nil && c.Shared.Fence == nil:
		return errors.New("log: Config.Shared.Fence is required in cluster mode")
	case c.Flush < FlushEveryBatch || c.Flush > FlushOS:
		return fmt.Errorf("log: Config.Flush %d is not a FlushMode", c.Flush)
	case c.Flush == FlushMessages && c.FlushMessages <= 0:
		return errors.New("log: Config.FlushMessages must be > 0 with FlushMessages")
	case c.Flush == FlushInterval && c.FlushInterval <= 0:
		return errors.New("log: Config.FlushInterval must be > 0 with FlushInterval")
	case c.WALSegmentBytes < 0 || c.RollInterval < 0 || c.RetentionCheckInterval < 0 || c.CleanerBackoff < 0:
		return errors.New("log: Config.WALSegmentBytes, RollInterval, RetentionCheckInterval and CleanerBackoff must be >= 0")
	case c.ProducerIDExpiration < 0:
		return errors.New("log: Config.ProducerIDExpiration (producer.id.expiration.ms) must be >= 0")
	case c.DecompressBudgetBytes < 0 || (c.DecompressBudgetBytes > 0 && c.DecompressBudgetBytes < batch.MinDecompressedLimit):
		return fmt.Errorf("log: Config.DecompressBudgetBytes must be 0 (default) or at least %d, got %d", batch.MinDecompressedLimit, c.DecompressBudgetBytes)
	case c.CleanerShare < 0 || c.CleanerShare > 1:
		return fmt.Errorf("log: Config.CleanerShare must be in [0, 1] (0: default), got %v", c.CleanerShare)
	case c.DecompressRatio < 0:
		return fmt.Errorf("log: Config.DecompressRatio must be >= 0, got %d", c.DecompressRatio)
	case c.MergeFanIn == 1 || c.MergeFanIn < -1:
		return fmt.Errorf("log: Config.MergeFanIn must be 0 (default), -1 (off) or at least 2, got %d", c.MergeFanIn)
	case c.CompactMapBytes < 0 || c.CompactMapBytes > 16<<30:
		return fmt.Errorf("log: Config.CompactMapBytes must be 0 (default) or at most 16 GiB, got %d", c.CompactMapBytes)
	case c.CompactObjectBytes < 0 || c.CompactObjectBytes > 1<<30:
		return fmt.Errorf("log: Config.CompactObjectBytes must be 0 (default) or at most 1 GiB, got %d", c.CompactObjectBytes)
	case c.MergeObjectBytes < 0 || c.MergeObjectBytes > 1<<30:
		return fmt.Errorf("log: Config.MergeObjectBytes must be 0 (default) or at most 1 GiB, got %d", c.MergeObjectBytes)
	}
	return nil
}

func (c *Config) fill() {
	d := DefaultConfig(c.Dir)
	if c.FlushInterval == 0 {
		c.FlushInterval = d.FlushInterval
	}
	if c.WALSegmentBytes == 0 {
		c.WALSegmentBytes = d.WALSegmentBytes
	}
	if c.MinFreeBytes == 0 {
		c.MinFreeBytes = d.MinFreeBytes
	}
	if c.RollInterval == 0 {
		c.RollInterval = d.RollInterval
	}
	if c.RetentionCheckInterval == 0 {
		c.RetentionCheckInterval = d.RetentionCheckInterval
	}
	if c.DeleteBytesPerSec == 0 {
		c.DeleteBytesPerSec = d.DeleteBytesPerSec
	}
	if c.AsyncBacklogBytes == 0 {
		c.AsyncBacklogBytes = d.AsyncBacklogBytes
	}
	if c.TailBytesPerPartition == 0 {
		c.TailBytesPerPartition = d.TailBytesPerPartition
	}
	if c.TailBytesTotal == 0 {
		c.TailBytesTotal = d.TailBytesTotal
	}
	if c.BlockCacheBytes == 0 {
		c.BlockCacheBytes = d.BlockCacheBytes
	}
	if c.PackedObjectBytes == 0 {
		c.PackedObjectBytes = d.PackedObjectBytes
	}
	if c.MaxPendingSegments <= 0 {
		c.MaxPendingSegments = d.MaxPendingSegments
	}
	if c.CleanerShare == 0 {
		c.CleanerShare = d.CleanerShare
	}
	if c.CompactBytesPerSec == 0 {
		c.CompactBytesPerSec = d.CompactBytesPerSec
	}
	if c.ProducerIDExpiration == 0 {
		c.ProducerIDExpiration = d.ProducerIDExpiration
	}
	if c.DecompressBudgetBytes == 0 {
		c.DecompressBudgetBytes = batch.DefaultDecompressBudget
	}
	if c.DecompressRatio == 0 {
		c.DecompressRatio = batch.DefaultDecompressRatio
	}
	if c.MergeFanIn == 0 {
		c.MergeFanIn = d.MergeFanIn
	}
	if c.CompactMapBytes == 0 {
		c.CompactMapBytes = d.CompactMapBytes
	}
	if c.CompactObjectBytes == 0 {
		c.CompactObjectBytes = d.CompactObjectBytes
	}
	if c.MergeObjectBytes == 0 {
		c.MergeObjectBytes = d.MergeObjectBytes
	}
	if c.MergeBytesPerSec == 0 {
		c.MergeBytesPerSec = d.MergeBytesPerSec
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Shared != nil {
		sc := *c.Shared
		if sc.MaxPartitionsPerObject <= 0 {
			sc.MaxPartitionsPerObject = DefaultMaxPartitionsPerObject
		}
		if sc.FlushPipeline <= 0 {
			sc.FlushPipeline = 8
		}
		if sc.SnapshotInterval <= 0 {
			sc.SnapshotInterval = 10 * time.Second
		}
		if sc.SnapshotBytes <= 0 {
			sc.SnapshotBytes = 4 << 20
		}
		if sc.SnapshotBudget <= 0 {
			sc.SnapshotBudget = 1024
		}
		if sc.OrphanGrace <= 0 {
			sc.OrphanGrace = time.Hour
		}
		c.Shared = &sc
	}
}

// Engine is the log engine of one broker.
type Engine struct {
	cfg   Config
	store objstore.Storage
	md    meta.Store
	log   *slog.Logger
	m     *metrics
	wal   *wal.Writer
	cache *blockCache
	dec   *batch.Decompressor // every decompression, under one budget

	ctx    context.Context // canceled by Close; background work uses it
	cancel context.CancelFunc
	bg     sync.WaitGroup
	closed atomic.Bool
	// stopping: the broker is stopping (Stopping, sharedsnap.go).
	stopping atomic.Bool

	// cleanerBackoff (ns) is the pause between compaction passes (Kafka's
	// log.cleaner.backoff.ms); cleanerKick tells the clean loop it changed.
	cleanerBackoff atomic.Int64
	cleanerKick    chan struct{}

	adminMu sync.Mutex // serializes topic admin operations

	mu     sync.RWMutex
	topics map[string]*topic
	byID   map[[16]byte]*topic

	objMu      sync.Mutex
	rollMemMu  sync.Mutex          // guards rollMem
	rollMem    map[uint64][][]byte // rollmem.go
	memRolls   atomic.Int64        // segments adopted from rollMem (tests look)
	objects    map[string]*object
	unlinked   []*object // live == 0, meta record still present
	toRemove   []*object // meta record gone; delete from storage next GC pass
	deleting   []*object // taken from toRemove by the GC pass running, not yet deleted
	rollQueue  []pendingRoll
	rollKick   chan struct{}
	rollDone   chan struct{} // closed and replaced each time a segment is rolled
	rolledUpTo atomic.Uint64 // highest WAL seq rolled (for tests and forceRoll)
	bp         rollPressure  // the roll queue's backpressure on the WAL writer

	tailBytes atomic.Int64 // owned rolled tail bytes across partitions

	// The merge of small extents (merge.go). mergeMu serializes merge
	// passes and guards mergeBad (inputs found not to match their
	// records, left alone). rewriteMu is held by whatever registers an
	// object replacing extents (a merge, compaction) from checking its
	// inputs are current until they are swapped out.
	mergeMu   sync.Mutex
	mergeBad  map[*extent]bool
	planner   mergePlanner
	mergeBuf  mergeBuffers
	rewriteMu sync.Mutex
	mm        *mergeMetrics
	mergeHook func(stage string) error // tests: stop a merge as a crash would

	// prodDirty: partitions whose rolled producer state changed since it
	// was last persisted. Owned by the roller goroutine.
	prodDirty map[*Partition]struct{}
	psnap     prodSnapLog // single node: the producer state deltas in meta

	seqMu    sync.Mutex
	objNext  int64
	objEnd   int64
	pidMu    sync.Mutex
	pidNext  int64
	pidEnd   int64
	recovery RecoveryReport

	// cluster mode (shared.go)
	snapMu        sync.Mutex // guards prodDirty and rolled producer state in shared mode
	snapWriteMu   sync.Mutex // serializes producer snapshot writes
	snapKick      chan struct{}
	snapQueue     snapQueue    // hand-off snapshots (sharedsnap.go)
	replayBytes   atomic.Int64 // bytes Acquire read to rebuild producer state
	replayExtents atomic.Int64 // extents it read them from
	regCh         chan *regJob
	putTimes      *putTimes     // cluster mode: recent PUT times, for hedging
	metaBatch     *meta.Batcher // cluster mode: per-partition Txns, merged (sharedfence.go)

	onTopicDeleted atomic.Pointer[func(name string)] // OnTopicDeleted
	regDone        chan struct{}
	listMu         sync.Mutex
	listNext       *objectList  // the listing callers wait for next
	listRunning    bool         // runListings is running
	recIdx         *recordIndex // the object records listed (sharedlist.go)
}

// Open loads topics and the object index from md, deletes orphaned objects,
// replays the WAL in cfg.Dir (truncating a torn tail), and starts the WAL
// writer, the roller and the retention/compaction loop.
func Open(ctx context.Context, cfg Config, store objstore.Storage, md meta.Store, logger *slog.Logger, reg prometheus.Registerer) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.fill()
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Shared == nil {
		if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
	}
	e := &Engine{cfg: cfg, store: store, md: md, log: logger, m: newMetrics(reg),
		topics: map[string]*topic{}, byID: map[[16]byte]*topic{}, objects: map[string]*object{},
		rollKick: make(chan struct{}, 1), rollDone: make(chan struct{}), cleanerKick: make(chan struct{}, 1),
		snapKick: make(chan struct{}, 1), mm: newMergeMetrics(reg), mergeBad: map[*extent]bool{}}
	e.cleanerBackoff.Store(int64(cfg.CleanerBackoff))
	e.cache = newBlockCache(cfg.BlockCacheBytes, e.m)
	if cfg.Shared != nil {
		e.cache.setReadAhead(cfg.Shared.ReadAheadBytes)
	}
	e.dec = batch.NewDecompressor(cfg.DecompressBudgetBytes)
	registerDecompressMetrics(reg, e.dec)
	registerSpaceMetrics(reg, e)
	registerGCMetrics(reg, e)
	e.ctx, e.cancel = context.WithCancel(context.Background())
	start := time.Now()
	var firstSeq uint64
	var err error
	if cfg.Shared != nil {
		err = e.recoverShared(ctx)
	} else {
		firstSeq, err = e.recover(ctx)
	}
	if err != nil {
		e.cancel()
		return nil, err
	}
	mode := map[FlushMode]wal.SyncMode{FlushEveryBatch: wal.SyncEvery, FlushMessages: wal.SyncMessages,
		FlushInterval: wal.SyncInterval, FlushOS: wal.SyncNever}[cfg.Flush]
	wo := wal.Options{
		Dir: cfg.Dir, Mode: mode, SyncMessages: cfg.FlushMessages, SyncInterval: cfg.FlushInterval,
		SegmentBytes: cfg.WALSegmentBytes, RollInterval: cfg.RollInterval, FirstSeq: firstSeq,
		MinFreeBytes: cfg.MinFreeBytes, FreeBytes: cfg.FreeBytes, DirectIO: !cfg.WALBuffered,
		OnDurable: func(owner any, end int64) { owner.(*Partition).advanceHW(end) },
		OnRoll:    e.enqueueRoll,
		OnRollData: func(seq uint64, bufs [][]byte) {
			if _, ok := e.store.(objstore.Linker); ok && !cfg.CopyRoll && cfg.Shared == nil {
				e.keepRollData(seq, bufs) // adoptSegment reads it instead of the file
			}
		},
		OnWrite: func(n, _ int, d time.Duration) {
			if cfg.Shared == nil {
				e.bp.open.Add(int64(n))
			}
			e.m.flushSeconds.Observe(d.Seconds())
			e.m.flushBytes.Add(float64(n))
		},
		Delay: e.walDelay,
		OnSync: func(d time.Duration) {
			e.m.fsyncs.Inc()
			e.m.fsyncSeconds.Observe(d.Seconds())
		},
		// Appends waiting for durability that a poisoned WAL will never
		// give (a duplicate's original, say) are told at once.
		// (In a goroutine of its own: the writer must not wait on e.mu.)
		OnFail: func(error) {
			go func() {
				e.mu.RLock()
				defer e.mu.RUnlock()
				e.forEachPartition(func(p *Partition) { p.wake(false) })
			}()
		},
		Logger: logger,
	}
	if cfg.Shared != nil {
		e.putTimes = newPutTimes(cfg.Shared.PutHedge)
		e.metaBatch = meta.NewBatcher(md)
		wo.SinkAsync = e.flushSharedAsync
		wo.SinkInFlight = cfg.Shared.FlushPipeline
		wo.OnDurable = nil // registerObject advances each registered partition itself
		wo.Delay = nil     // no roller: every flush is an object already
		e.regCh, e.regDone = make(chan *regJob, cfg.Shared.FlushPipeline), make(chan struct{})
		go e.registerLoop()
	}
	e.wal, err = wal.Open(wo)
	if err != nil {
		e.cancel()
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	e.recovery.Duration = time.Since(start)
	r := e.recovery
	logger.Info("log engine opened", "wal_segments", r.WALSegments, "wal_bytes_replayed", r.WALBytesReplayed,
		"partitions", r.Partitions, "objects", len(e.objects), "duration", r.Duration)
	if r.TruncatedBytes > 0 {
		logger.Warn("truncated torn or corrupt WAL tail", "bytes", r.TruncatedBytes, "files", r.TruncatedFiles)
	}
	e.bg.Add(2)
	go e.rollLoop()
	go e.cleanLoop()
	if cfg.Shared == nil {
		e.bg.Add(1)
		go e.mergeLoop()
	}
	if cfg.Shared != nil {
		e.bg.Add(3)
		go e.watchTopics()
		go e.rollLoopShared()
		go e.snapshotLoop()
	}
	return e, nil
}

// Close writes and fsyncs everything appended, stops background work and
// wakes every waiter. Unrolled WAL segments are replayed by the next Open.
func (e *Engine) Close() error {
	if !e.closed.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if e.shared() {
		// Let pending flushes land while storage answers; give up (and
		// fail them) after a bound so a dead store cannot hang shutdown.
		done := make(chan error, 1)
		go func() { done <- e.wal.Close() }()
		select {
		case err = <-done:
		case <-time.After(15 * time.Second):
			e.cancel()
			err = <-done
		}
		close(e.regCh)
		<-e.regDone
	}
	e.cancel()
	e.bg.Wait()
	e.cache.close()
	if !e.shared() {
		err = e.wal.Close()
	}
	e.mu.RLock()
	for _, t := range e.topics {
		for _, p := range t.partitions() {
			p.wake(true)
		}
	}
	e.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

// Recovery reports what Open found and did.
// Space is the WAL's free-space guard state (a zero Space with FreeBytes
// -1 when the engine has no WAL).
func (e *Engine) Space() wal.Space {
	if e.wal == nil {
		return wal.Space{FreeBytes: -1}
	}
	return e.wal.Space()
}

func (e *Engine) Recovery() RecoveryReport {
	r := e.recovery
	r.TruncatedFiles = append([]string(nil), r.TruncatedFiles...)
	return r
}

// NextProducerID returns a durable, monotonically increasing producer id.
// Ids are reserved from meta in blocks of 1000, so a restart skips at most
// the rest of a block.
func (e *Engine) NextProducerID(ctx context.Context) (int64, error) {
	e.pidMu.Lock()
	defer e.pidMu.Unlock()
	if e.pidNext >= e.pidEnd {
		start, err := allocBlock(ctx, e.md, keySeqProduce, 1000)
		if err != nil {
			return 0, err
		}
		e.pidNext, e.pidEnd = start, start+1000
	}
	id := e.pidNext
	e.pidNext++
	return id, nil
}

// nextObjectKey returns a data object key that never repeats: a durable
// sequence (which also orders objects for supersession) plus a random tag.
func (e *Engine) nextObjectKey(ctx context.Context) (string, uint64, error) {
	e.seqMu.Lock()
	defer e.seqMu.Unlock()
	if e.objNext >= e.objEnd {
		start, err := allocBlock(ctx, e.md, keySeqObject, 1000)
		if err != nil {
			return "", 0, err
		}
		e.objNext, e.objEnd = start+1, start+1001 // gen 0 is never used
	}
	seq := uint64(e.objNext)
	e.objNext++
	return fmt.Sprintf("%s%016x-%s", objectPrefix, seq, randHex(4)), seq, nil
}

func (e *Engine) nowMs() int64 { return e.cfg.Now().UnixMilli() }

// halt stops the engine as a crash would (nothing pending written, no
// fsync, no final flush). Tests use it to reopen a directory "after a crash".
func (e *Engine) halt() {
	if !e.closed.CompareAndSwap(false, true) {
		return
	}
	e.cancel()
	e.bg.Wait()
	e.cache.close()
	e.wal.Kill()
}
