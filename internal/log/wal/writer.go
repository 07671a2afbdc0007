package wal

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// SyncMode says when the writer fsyncs.
type SyncMode int

const (
	SyncEvery    SyncMode = iota // every group commit
	SyncMessages                 // once SyncMessages records are unsynced (or SyncInterval passed)
	SyncInterval                 // every SyncInterval
	SyncNever                    // leave it to the OS; written counts as durable
)

// ErrClosed is returned by Reserve after Close.
var ErrClosed = errors.New("wal: closed")

// ErrFull is returned by Reserve while the WAL's file system is full: a
// write found no space (ENOSPC, EDQUOT) and waits for some, or free space
// fell below Options.MinFreeBytes (below half of it for ReserveInternal).
// Appends resume by themselves once space is freed (retention, deleted
// topics, an operator); nothing reserved before is lost or failed
// meanwhile.
var ErrFull = errors.New("wal: disk full")

// segmentFile is what the writer needs of a segment file (an *os.File;
// tests substitute one that runs out of space).
type segmentFile interface {
	io.Writer
	Sync() error
	Truncate(size int64) error
	Seek(offset int64, whence int) (int64, error)
	Close() error
	Name() string
}

func createFile(path string) (segmentFile, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
}

// noSpace reports whether err means the file system is out of space (or
// the user out of quota): waited out, not fatal.
func noSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// Writer is the group-commit WAL writer. Lock order: callers' locks, then w.mu.
type Writer struct {
	o    Options
	kick chan struct{}
	stop chan struct{}
	done chan struct{}

	// refused counts reservations refused for want of space; free is the
	// last free-space probe (-1: none yet). Both are read by Space.
	refused, refusedInternal atomic.Int64
	free                     atomic.Int64

	mu         sync.Mutex
	cur        *Group
	chunk      []byte // len = used
	chunkStart int    // start of cur's region in chunk
	chunkFresh bool   // cur's region in chunk was placed fresh (chunks.go)
	aligned    bool   // chunks are laid out for direct writes (chunks.go)
	nextLead   int    // >= 0: where a new chunk's first reservation starts
	closed     bool
	killed     bool
	failed     error
	full       error // non-nil: every reservation is refused with it (wraps ErrFull)
	low        error // non-nil: Reserve (not ReserveInternal) is refused with it (wraps ErrFull)
	rollReq    []chan struct{}

	// SyncEvery pipelining: the writer hands written groups to the syncer
	// goroutine, so group N+1 is written while group N is fsynced.
	syncMu   sync.Mutex
	syncCond *sync.Cond
	pending  []*Group // written, waiting for the syncer
	syncFile segmentFile
	syncing  bool
	syncStop bool
	syncDone chan struct{}

	// SinkAsync pipelining
	sinkSem chan struct{}
	sinkWG  sync.WaitGroup

	// writer goroutine only
	direct      bool     // create segments with O_DIRECT (direct.go) while the file system takes it
	segBufs     [][]byte // what was written to the open segment (Options.OnRollData)
	segN        int64    // bytes in segBufs
	segBufsOK   bool     // segBufs is all of it
	directBytes int64    // written from the chunks without a staging copy (tests look)
	f           segmentFile
	seq         uint64
	size        int64
	created     time.Time
	unsynced    []*Group
	unsyncRecs  int64
	lastSync    time.Time
	noSpace     error     // a write found the disk full; cleared once one fits
	lowSpace    bool      // free space is below MinFreeBytes
	floorSpace  bool      // free space is below the hard floor, MinFreeBytes/2
	sinceFree   int64     // bytes written since the last free-space check
	lastFree    time.Time // time of the last free-space check
}

// Open starts a writer. Segment files are created lazily on first write.
func Open(o Options) (*Writer, error) {
	if o.SegmentBytes <= 0 {
		o.SegmentBytes = 64 << 20
	}
	if o.ChunkBytes <= 0 {
		o.ChunkBytes = 1 << 20
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnDurable == nil {
		o.OnDurable = func(any, int64) {}
	}
	if o.OnRoll == nil {
		o.OnRoll = func(uint64) {}
	}
	if o.SinkAsync != nil && o.SinkInFlight <= 0 {
		o.SinkInFlight = 2
	}
	direct := o.DirectIO && o.create == nil && o.Sink == nil && o.SinkAsync == nil
	if o.create == nil {
		o.create = createFile
	}
	if o.FreeBytes == nil {
		o.FreeBytes = freeBytes
	}
	if o.MinFreeBytes < 0 || o.Sink != nil || o.SinkAsync != nil {
		o.MinFreeBytes = 0
	}
	if o.Sink == nil && o.SinkAsync == nil {
		if err := os.MkdirAll(o.Dir, 0o755); err != nil {
			return nil, err
		}
	}
	w := &Writer{o: o, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
		cur: newGroup(), seq: o.FirstSeq, lastSync: time.Now(), syncDone: make(chan struct{}), direct: direct,
		aligned: direct, nextLead: len(Magic)}
	w.syncCond = sync.NewCond(&w.syncMu)
	w.sinkSem = make(chan struct{}, max(o.SinkInFlight, 1))
	w.free.Store(-1)
	if o.MinFreeBytes > 0 {
		w.checkFree(time.Now())
	}
	go w.run()
	if o.Mode == SyncEvery {
		go w.syncLoop()
	} else {
		close(w.syncDone)
	}
	return w, nil
}

// Reserve takes n bytes in the current group for an entry (or several)
// ending at offset end for owner, holding records records. The caller fills
// r.Buf and calls r.Commit. Reservations become durable in the order they
// were made, so a caller that reserves under its own lock gets log order.
// Below Options.MinFreeBytes of free space it is refused (ErrFull).
func (w *Writer) Reserve(n int, owner any, end int64, records int64) (Reservation, error) {
	return w.reserve(n, owner, end, records, false)
}

// ReserveInternal is Reserve for the broker's own small writes (offset
// commits, coordinator state, transaction markers): it draws on the
// reserve, the lower half of Options.MinFreeBytes, so consumers can still
// record progress and transactions still end while the free-space guard
// refuses clients' records. It is refused only below the hard floor,
// MinFreeBytes/2, or when a write found the disk full.
func (w *Writer) ReserveInternal(n int, owner any, end int64, records int64) (Reservation, error) {
	return w.reserve(n, owner, end, records, true)
}

func (w *Writer) reserve(n int, owner any, end int64, records int64, internal bool) (Reservation, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return Reservation{}, ErrClosed
	}
	if w.failed != nil {
		err := w.failed
		w.mu.Unlock()
		return Reservation{}, err
	}
	if w.full != nil {
		err := w.full
		w.mu.Unlock()
		if internal {
			w.refusedInternal.Add(1)
		} else {
			w.refused.Add(1)
		}
		return Reservation{}, err
	}
	if w.low != nil && !internal {
		err := w.low
		w.mu.Unlock()
		w.refused.Add(1)
		return Reservation{}, err
	}
	if cap(w.chunk)-len(w.chunk) < n {
		if len(w.chunk) > w.chunkStart {
			w.cur.bufs = append(w.cur.bufs, w.chunk[w.chunkStart:len(w.chunk)])
			w.cur.fresh = append(w.cur.fresh, w.chunkFresh)
		}
		w.newChunk(n)
	}
	l := len(w.chunk)
	w.chunk = w.chunk[:l+n]
	buf := w.chunk[l : l+n : l+n]
	g := w.cur
	wasEmpty := len(g.items) == 0
	g.items = append(g.items, Item{Owner: owner, End: end})
	g.records += records
	g.size += int64(n)
	size := g.size
	g.wg.Add(1)
	w.mu.Unlock()
	if wasEmpty {
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
	return Reservation{Buf: buf, G: g, GroupBytes: size}, nil
}

// Err is the failure that poisoned the writer, or nil: every append not
// durable by then never will be, and Reserve refuses.
func (w *Writer) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

// setFailed poisons the writer with err, once.
func (w *Writer) setFailed(err error) {
	w.mu.Lock()
	first := w.failed == nil
	if first {
		w.failed = err
	}
	w.mu.Unlock()
	if first && w.o.OnFail != nil {
		w.o.OnFail(err)
	}
}

// Roll asks the writer to close the current segment (if it holds data) and
// returns a channel closed once that happened.
func (w *Writer) Roll() <-chan struct{} {
	ch := make(chan struct{})
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		close(ch)
		return ch
	}
	w.rollReq = append(w.rollReq, ch)
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return ch
}

// Kill stops the writer as a crash would: nothing pending is written, no
// fsync, waiters are left hanging. For crash tests only.
func (w *Writer) Kill() {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return
	}
	w.closed = true
	w.killed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	w.stopSyncer()
}

// Close writes and fsyncs everything reserved, closes the segment (without
// rolling it: the next Open replays it) and stops the writer.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		<-w.done
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	close(w.stop)
	<-w.done
	w.sinkWG.Wait() // every group handed to SinkAsync is settled
	w.stopSyncer()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failed
}

func (w *Writer) tickEvery() time.Duration {
	d := time.Second
	if w.o.RollInterval > 0 && w.o.RollInterval/2 < d {
		d = w.o.RollInterval / 2
	}
	if (w.o.Mode == SyncInterval || w.o.Mode == SyncMessages) && w.o.SyncInterval > 0 && w.o.SyncInterval/2 < d {
		d = w.o.SyncInterval / 2
	}
	return max(d, time.Millisecond)
}

func (w *Writer) run() {
	defer close(w.done)
	t := time.NewTicker(w.tickEvery())
	defer t.Stop()
	for {
		stopping := false
		select {
		case <-w.kick:
		case <-t.C:
		case <-w.stop:
			stopping = true
			w.mu.Lock()
			killed := w.killed
			w.mu.Unlock()
			if killed {
				if w.f != nil {
					w.f.Close()
				}
				return
			}
		}
		w.flushOnce()
		w.periodic(time.Now())
		if stopping {
			w.flushOnce() // anything reserved while the last flush ran
			w.drainSyncer()
			if w.trimPadding() && len(w.unsynced) == 0 && w.o.Mode != SyncNever && w.Err() == nil {
				_ = w.f.Sync() // the cut size; the data was synced already
			}
			w.sync()
			if w.f != nil {
				w.f.Close()
				w.f = nil
			}
			w.mu.Lock()
			reqs := w.rollReq
			w.rollReq = nil
			w.mu.Unlock()
			for _, ch := range reqs {
				close(ch)
			}
			return
		}
	}
}

// flushOnce writes the current group, if any, and applies the sync policy.
func (w *Writer) flushOnce() {
	w.mu.Lock()
	g := w.cur
	if len(g.items) == 0 {
		w.mu.Unlock()
		return
	}
	w.cutGroup(g)
	w.cur = newGroup()
	w.mu.Unlock()

	g.wg.Wait() // every reservation of g is filled
	w.mu.Lock()
	failed := w.failed
	w.mu.Unlock()
	if failed != nil {
		g.werr, g.derr = failed, failed
		close(g.written)
		close(g.durable)
		return
	}
	if w.o.Delay != nil {
		w.delay(groupBytes(g))
	}
	if w.o.SinkAsync != nil {
		w.sinkGroupAsync(g)
		return
	}
	if w.o.Sink != nil {
		w.sinkGroup(g)
		return
	}
	start := time.Now()
	pre, err := w.write(g)
	if err != nil && noSpace(err) {
		err = w.waitForSpace(g, pre, err)
	}
	if w.o.OnWrite != nil {
		w.o.OnWrite(groupBytes(g), len(g.items), time.Since(start))
	}
	if err != nil {
		w.fail(g, err)
		return
	}
	if w.o.OnRollData != nil {
		w.segBufs = append(w.segBufs, g.bufs...)
		w.segN += int64(groupBytes(g))
	}
	if w.o.MinFreeBytes > 0 {
		w.sinceFree += w.size - pre
		if w.sinceFree >= max(w.o.MinFreeBytes/8, 1) {
			w.checkFree(time.Now())
		}
	}
	if w.o.Mode == SyncEvery {
		close(g.written)
		w.syncMu.Lock()
		w.pending = append(w.pending, g)
		w.syncFile = w.f
		w.syncCond.Broadcast()
		w.syncMu.Unlock()
		if w.size >= w.o.SegmentBytes {
			w.rollSegment()
		}
		return
	}
	w.unsynced = append(w.unsynced, g)
	w.unsyncRecs += g.records
	if w.o.Mode == SyncNever {
		w.markDurable()
	}
	close(g.written) // acks=1 need not wait for the fsync below
	switch w.o.Mode {
	case SyncMessages:
		if w.o.SyncMessages <= 0 || w.unsyncRecs >= w.o.SyncMessages {
			w.sync()
		}
	}
	if w.size >= w.o.SegmentBytes {
		w.rollSegment()
	}
}

// DelaySlice is the longest the writer waits before asking Options.Delay
// again.
const DelaySlice = 10 * time.Millisecond

// delay holds a group of n bytes back as long as Options.Delay asks, or
// until the writer is told to stop.
func (w *Writer) delay(n int) {
	var start time.Time
	var waited time.Duration
	for {
		d := w.o.Delay(int64(n), waited)
		if d <= 0 {
			return
		}
		if start.IsZero() {
			start = time.Now()
		}
		t := time.NewTimer(min(d, DelaySlice))
		select {
		case <-t.C:
		case <-w.stop:
			t.Stop()
			return
		}
		waited = time.Since(start)
	}
}

// sinkGroup hands g to Options.Sink and settles it.
func (w *Writer) sinkGroup(g *Group) {
	close(g.written)
	start := time.Now()
	w.settleSunk(g, start, w.o.Sink(g.bufs, g.items))
}

// settleSunk settles g once its sink returned err.
func (w *Writer) settleSunk(g *Group, start time.Time, err error) {
	if w.o.OnWrite != nil {
		w.o.OnWrite(groupBytes(g), len(g.items), time.Since(start))
	}
	if err != nil {
		g.derr = err
	} else {
		for _, it := range g.items {
			w.o.OnDurable(it.Owner, it.End)
		}
	}
	close(g.durable)
}

// sinkGroupAsync hands g to Options.SinkAsync, waiting first while
// SinkInFlight groups are unsettled.
func (w *Writer) sinkGroupAsync(g *Group) {
	w.sinkSem <- struct{}{}
	w.sinkWG.Add(1)
	close(g.written)
	start := time.Now()
	w.o.SinkAsync(g.bufs, g.items, func(err error) {
		w.settleSunk(g, start, err)
		<-w.sinkSem
		w.sinkWG.Done()
	})
}

func groupBytes(g *Group) int {
	n := 0
	for _, b := range g.bufs {
		n += len(b)
	}
	return n
}

// write appends g to the current segment, creating it first if needed. pre
// is the segment's size before g (or -1 if no segment could be created).
func (w *Writer) write(g *Group) (pre int64, err error) {
	if w.f == nil {
		if err := w.openSegment(); err != nil {
			return -1, err
		}
	}
	pre = w.size
	if d, ok := w.f.(*directFile); ok {
		before := d.directBytes
		size, err := d.writeBufs(w.size, g.bufs, g.fresh)
		w.directBytes += d.directBytes - before
		w.size = size
		if err != nil {
			return pre, fmt.Errorf("wal: write %s: %w", SegmentName(w.seq), err)
		}
		return pre, nil
	}
	for _, b := range g.bufs {
		n, err := w.f.Write(b)
		w.size += int64(n)
		if err != nil {
			return pre, fmt.Errorf("wal: write %s: %w", SegmentName(w.seq), err)
		}
	}
	return pre, nil
}

func (w *Writer) openSegment() error {
	w.segBufs, w.segN, w.segBufsOK = nil, 0, true
	path := filepath.Join(w.o.Dir, SegmentName(w.seq))
	if w.direct {
		d, ok, err := createDirect(path)
		if err != nil {
			return fmt.Errorf("wal: create segment: %w", err)
		}
		if ok {
			w.syncDir()
			w.f, w.size, w.created = d, int64(len(Magic)), time.Now()
			return nil
		}
		w.direct = false
		w.mu.Lock()
		w.aligned = false
		w.mu.Unlock()
		w.o.Logger.Info("wal: the file system refuses direct I/O; writing segments through the page cache", "dir", w.o.Dir)
	}
	f, err := w.o.create(path)
	if err != nil {
		return fmt.Errorf("wal: create segment: %w", err)
	}
	if _, err := f.Write(Magic[:]); err != nil {
		f.Close()
		os.Remove(path) // no entry in it; the next attempt creates it again
		return fmt.Errorf("wal: write segment magic: %w", err)
	}
	w.syncDir()
	w.f, w.size, w.created = f, int64(len(Magic)), time.Now()
	return nil
}

// syncDir makes a new segment's directory entry survive a power loss along
// with the data synced into the file later.
func (w *Writer) syncDir() {
	if d, err := os.Open(w.o.Dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
}

// trimPadding cuts a direct segment's zero padding off (closing or
// rolling it); the caller fsyncs. A failure is logged only: recovery
// cuts padding too.
func (w *Writer) trimPadding() bool {
	d, ok := w.f.(*directFile)
	if !ok || d.carry == 0 {
		return false
	}
	if err := d.trim(w.size); err != nil {
		w.o.Logger.Warn("wal: cutting padding", "segment", SegmentName(w.seq), "err", err)
		return false
	}
	return true
}

// fail poisons the writer: a WAL that cannot write cannot promise anything.
func (w *Writer) fail(g *Group, err error) {
	w.segBufsOK = false
	w.o.Logger.Error("wal write failed; refusing further appends", "err", err)
	w.setFailed(err)
	for _, u := range w.unsynced {
		u.derr = err
		close(u.durable)
	}
	w.unsynced = nil
	g.werr, g.derr = err, err
	close(g.written)
	close(g.durable)
}

func (w *Writer) sync() {
	if len(w.unsynced) == 0 {
		return
	}
	if w.f != nil && w.o.Mode != SyncNever {
		start := time.Now()
		if err := w.f.Sync(); err != nil {
			w.poison(fmt.Errorf("wal: fsync %s: %w", SegmentName(w.seq), err))
			return
		}
		if w.o.OnSync != nil {
			w.o.OnSync(time.Since(start))
		}
	}
	w.lastSync = time.Now()
	w.markDurable()
}

func (w *Writer) markDurable() {
	for _, g := range w.unsynced {
		for _, it := range g.items {
			w.o.OnDurable(it.Owner, it.End)
		}
		close(g.durable)
	}
	w.unsynced = w.unsynced[:0]
	w.unsyncRecs = 0
}

func (w *Writer) periodic(now time.Time) {
	if w.o.MinFreeBytes > 0 && now.Sub(w.lastFree) >= time.Second {
		w.checkFree(now)
	}
	if len(w.unsynced) > 0 && (w.o.Mode == SyncInterval || w.o.Mode == SyncMessages) {
		iv := w.o.SyncInterval
		if iv <= 0 {
			iv = time.Second // backstop so acks=all never waits forever
		}
		if now.Sub(w.lastSync) >= iv {
			w.sync()
		}
	}
	w.mu.Lock()
	reqs := w.rollReq
	w.rollReq = nil
	w.mu.Unlock()
	if w.f != nil && (len(reqs) > 0 || (w.o.RollInterval > 0 && now.Sub(w.created) >= w.o.RollInterval)) {
		w.rollSegment()
	}
	for _, ch := range reqs {
		close(ch)
	}
}

// rollSegment fsyncs and closes the current segment and hands it to OnRoll.
func (w *Writer) rollSegment() {
	if w.f == nil {
		return
	}
	w.drainSyncer()
	w.trimPadding()
	if w.o.Mode != SyncNever {
		if err := w.f.Sync(); err != nil {
			w.poison(fmt.Errorf("wal: fsync %s at roll: %w", SegmentName(w.seq), err))
			return
		}
		if w.o.OnSync != nil {
			w.o.OnSync(0)
		}
	}
	w.lastSync = time.Now()
	w.markDurable()
	w.f.Close()
	w.f = nil
	seq := w.seq
	w.seq++
	if w.o.OnRollData != nil && w.segBufsOK && int64(len(Magic))+w.segN == w.size {
		w.o.OnRollData(seq, w.segBufs)
	}
	w.segBufs = nil
	w.o.OnRoll(seq)
}

// poison fails every unsynced group and all later appends: after a failed
// fsync the kernel may have dropped dirty pages, so nothing unsynced can be
// promised (the fsyncgate lesson).
func (w *Writer) poison(err error) {
	w.o.Logger.Error("wal fsync failed; refusing further appends", "err", err)
	w.setFailed(err)
	for _, u := range w.unsynced {
		u.derr = err
		close(u.durable)
	}
	w.unsynced = nil
}

// syncLoop fsyncs written groups in order and marks them durable.
func (w *Writer) syncLoop() {
	defer close(w.syncDone)
	for {
		w.syncMu.Lock()
		for len(w.pending) == 0 && !w.syncStop {
			w.syncCond.Wait()
		}
		if len(w.pending) == 0 || w.syncStop {
			w.syncMu.Unlock()
			return
		}
		gs, f := w.pending, w.syncFile
		w.pending = nil
		w.syncing = true
		w.syncMu.Unlock()

		start := time.Now()
		err := f.Sync()
		if err != nil {
			err = fmt.Errorf("wal: fsync %s: %w", f.Name(), err)
			w.o.Logger.Error("wal fsync failed; refusing further appends", "err", err)
			w.setFailed(err)
			for _, g := range gs {
				g.derr = err
				close(g.durable)
			}
		} else {
			if w.o.OnSync != nil {
				w.o.OnSync(time.Since(start))
			}
			for _, g := range gs {
				for _, it := range g.items {
					w.o.OnDurable(it.Owner, it.End)
				}
				close(g.durable)
			}
		}
		w.syncMu.Lock()
		w.syncing = false
		w.syncCond.Broadcast()
		w.syncMu.Unlock()
	}
}

// drainSyncer waits until the syncer has synced everything handed to it, so
// the writer may close the file (and later groups stay in log order).
func (w *Writer) drainSyncer() {
	w.syncMu.Lock()
	for (len(w.pending) > 0 || w.syncing) && !w.syncStop {
		w.syncCond.Wait()
	}
	w.syncMu.Unlock()
}

func (w *Writer) stopSyncer() {
	w.syncMu.Lock()
	w.syncStop = true
	w.syncCond.Broadcast()
	w.syncMu.Unlock()
	<-w.syncDone
}
