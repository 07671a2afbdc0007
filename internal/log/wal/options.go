package wal

import (
	"log/slog"
	"sync"
	"time"
)

// Options configure a Writer.
type Options struct {
	Dir          string
	Mode         SyncMode
	SyncMessages int64
	SyncInterval time.Duration
	SegmentBytes int64
	RollInterval time.Duration
	FirstSeq     uint64 // sequence number of the first segment this writer creates
	// DirectIO writes segment files with O_DIRECT where the file system
	// takes it (direct.go), falling back to the page cache where it does
	// not. The durability promise is the same either way: a group is
	// durable once fsynced (SyncEvery, ...).
	DirectIO bool
	// ChunkBytes is the size of the in-memory buffers entries are copied
	// into (default 1 MiB). Buffers are not reused: callers may keep
	// slices of them (the log engine serves its tail from them).
	ChunkBytes int
	// OnDurable is called, in the writer goroutine and in log order, for
	// every reservation once it is durable under Mode, before the group's
	// Durable channel closes.
	OnDurable func(owner any, end int64)
	// OnRoll is called, in the writer goroutine, after segment seq was
	// fsynced and closed. It may block (backpressure: the writer writes
	// nothing meanwhile) but must not wait for the writer.
	OnRoll func(seq uint64)
	// OnRollData, when set, is called in the writer goroutine just before
	// OnRoll with the bytes the writer wrote to segment seq after its
	// magic, in order: every group's bufs, each holding whole entries.
	// They alias the reservations' buffers, which are never written again,
	// so the roller can read the segment's entries from memory instead of
	// from the file. Not called for a segment whose writes were retried
	// or failed.
	OnRollData func(seq uint64, bufs [][]byte)
	// Delay, when set, is asked in the writer goroutine, before each group
	// commit is written, how much longer to hold it back: groupBytes is
	// the group's size, waited how long it has been held back so far (0
	// at the first ask). While it answers d > 0 the writer waits d, or
	// DelaySlice if shorter, and asks again, so a delay lifted meanwhile
	// ends the wait; Close and Kill cut it short. It lets the work the
	// WAL feeds (the roller) slow the writer down gradually as it falls
	// behind, well before OnRoll has to block it: appends wait longer,
	// and join bigger groups, rather than stopping. Nil costs nothing.
	Delay func(groupBytes int64, waited time.Duration) time.Duration
	// OnWrite and OnSync report metrics; optional.
	OnWrite func(bytes int, entries int, d time.Duration)
	OnSync  func(d time.Duration)
	// OnFail is called once, in the writer or syncer goroutine, when a
	// write or fsync failure poisons the writer (Err is then set), so
	// waiters on appends that will never be durable can be told.
	OnFail func(err error)
	Logger *slog.Logger
	// Sink, when set, replaces segment files: each group commit is handed
	// to Sink (bufs hold whole entries, in reservation order) in the writer
	// goroutine, one group at a time, and is durable once Sink returns nil.
	// Cluster mode uses it to make every flush one object PUT. Dir, Mode,
	// SegmentBytes and RollInterval are ignored; Written closes as soon as
	// the group is handed over (acks=1 is then answered from memory). An
	// error fails that group only; the writer carries on.
	Sink func(bufs [][]byte, items []Item) error
	// SinkAsync is Sink for a sink that pipelines: it may return before the
	// group is durable and calls settle (once, from any goroutine, groups
	// in order) when it is; meanwhile the writer hands it the next groups,
	// up to SinkInFlight (default 2) unsettled at a time.
	SinkAsync    func(bufs [][]byte, items []Item, settle func(error))
	SinkInFlight int
	// MinFreeBytes, when > 0, refuses reservations (ErrFull) while the
	// file system holding Dir has less free space than this, so a full
	// disk is met with a clear, retriable refusal and room is left for
	// rolls and metadata. Its lower half is a reserve for ReserveInternal:
	// those are refused only below MinFreeBytes/2, the hard floor. Checked
	// after every MinFreeBytes/8 bytes written and at least every second.
	MinFreeBytes int64
	// FreeBytes reports the space available on dir's file system (nil:
	// statfs). Tests substitute a file system that fills up on demand.
	FreeBytes func(dir string) (int64, error)

	// Tests only: segment creation.
	create func(path string) (segmentFile, error)
}

// Item is one reservation of a group: its owner and the offset it ends at.
type Item struct {
	Owner any
	End   int64
}

type item = Item

// Group is one group commit: everything reserved between two flushes.
type Group struct {
	bufs    [][]byte
	fresh   []bool // per buf: placed in phase at a fresh start (chunks.go)
	items   []item
	records int64
	size    int64 // bytes reserved
	wg      sync.WaitGroup
	written chan struct{}
	durable chan struct{}
	werr    error // set before written closes
	derr    error // set before durable closes
}

func newGroup() *Group {
	return &Group{written: make(chan struct{}), durable: make(chan struct{})}
}

// Written closes once the group is written to the segment file (page cache).
func (g *Group) Written() <-chan struct{} { return g.written }

// Durable closes once the group is durable under the sync mode.
func (g *Group) Durable() <-chan struct{} { return g.durable }

// WriteErr is the write error; valid once Written is closed.
func (g *Group) WriteErr() error { return g.werr }

// DurableErr is the write or sync error; valid once Durable is closed.
func (g *Group) DurableErr() error { return g.derr }

// Reservation is space in the current group. The caller fills Buf and must
// call Commit exactly once, promptly: the writer waits for it.
type Reservation struct {
	Buf []byte
	G   *Group
	// GroupBytes is the size of G, this reservation included, when it was
	// made: how much is waiting for the writer to take it.
	GroupBytes int64
}

// Commit hands the filled reservation to the writer.
func (r Reservation) Commit() { r.G.wg.Done() }
