package lag

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-mq/sluice/internal/group"
)

// Config sets the window of commits and the verdict's thresholds.
type Config struct {
	// Window is how many commits are kept per group and partition
	// (Burrow's intervals).
	Window int
	// MinDistance is the least time between two kept commits: a commit
	// closer than that to the newest kept one replaces it.
	MinDistance time.Duration
	// StoppedAfter is the least time without a commit, while lag exists,
	// for a partition to be STOPPED (the window's span counts too).
	StoppedAfter time.Duration
	// MaxPartitions bounds the windows kept (groups x partitions); commits
	// of partitions beyond it are not tracked (their verdict falls back to
	// the commit time alone).
	MaxPartitions int
}

// DefaultConfig is what the broker uses unless configured otherwise.
func DefaultConfig() Config {
	return Config{Window: 10, MinDistance: time.Second, StoppedAfter: time.Minute, MaxPartitions: 1 << 20}
}

// Log is what lag needs of the log: a partition's offsets, and the
// timestamp of a record.
type Log interface {
	// Offsets returns the partition's log start offset and high watermark.
	Offsets(topic string, partition int32) (start, end int64, err error)
	// Timestamp returns the timestamp (Unix ms) of the first record at or
	// after offset; ok is false when there is none below the high
	// watermark.
	Timestamp(topic string, partition int32, offset int64) (ts int64, ok bool, err error)
}

type tp struct {
	topic string
	part  int32
}

// window is one partition's recent commits, oldest first.
type window struct {
	entries []Entry
	// The timestamp of the record at tsOffset, cached: a committed offset
	// that does not move (a stopped or stalled consumer) is looked up once.
	tsOffset, ts int64
}

// Groups is what lag needs of the group coordinator.
type Groups interface {
	// Groups lists the groups this broker coordinates, with their
	// committed offsets.
	Groups() ([]GroupOffsets, error)
}

// GroupOffsets is one group as the coordinator sees it.
type GroupOffsets struct {
	Group string
	State string // Kafka's group state: Stable, Empty, ...
	// Generation counts rebalances (the consumer protocol's group epoch).
	Generation int32
	Members    []Member
	Offsets    []Committed
}

// Member is one member of a group and the partitions assigned to it (none
// known when the group is rebalancing, or for a classic group of a
// protocol other than "consumer").
type Member struct {
	ID       string           `json:"member_id"`
	ClientID string           `json:"client_id"`
	Host     string           `json:"host"`
	Assigned []TopicPartition `json:"assigned"`
}

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

// Committed is one partition's committed offset.
type Committed struct {
	Topic      string
	Partition  int32
	Offset     int64
	CommitTime int64 // Unix ms
}

// Tracker keeps the windows of commits and judges the groups. It
// implements group.CommitObserver.
type Tracker struct {
	cfg     Config
	log     Log
	groupsS Groups
	now     func() time.Time
	dropped atomic.Int64 // commits not tracked: MaxPartitions reached

	mu      sync.Mutex
	groups  map[string]map[tp]*window
	windows int
	commits map[string]int64 // commits observed per group, for the commit rate
	history map[string][]Point
}

// NewTracker returns a tracker reading offsets from log and the groups
// from groups.
func NewTracker(cfg Config, log Log, groups Groups) *Tracker {
	def := DefaultConfig()
	if cfg.Window <= 0 {
		cfg.Window = def.Window
	}
	if cfg.MaxPartitions <= 0 {
		cfg.MaxPartitions = def.MaxPartitions
	}
	return &Tracker{cfg: cfg, log: log, groupsS: groups, now: time.Now, groups: map[string]map[tp]*window{}, commits: map[string]int64{}}
}

var _ group.CommitObserver = (*Tracker)(nil)

// Committed records commits that became durable.
func (t *Tracker) Committed(g string, offsets []group.ObservedCommit) {
	type seen struct {
		k   tp
		e   Entry
		err error
	}
	// The high watermarks are read before taking the lock.
	batch := make([]seen, len(offsets))
	for i, o := range offsets {
		_, end, err := t.log.Offsets(o.Topic, o.Partition)
		batch[i] = seen{k: tp{o.Topic, o.Partition}, e: Entry{Offset: o.Offset, Lag: max(end-o.Offset, 0), At: o.CommitTime}, err: err}
	}
	minDist := t.cfg.MinDistance.Milliseconds()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.commits[g] += int64(len(offsets))
	parts := t.groups[g]
	for _, s := range batch {
		if s.err != nil {
			continue // the partition is gone or not readable: nothing to judge
		}
		w := parts[s.k]
		if w == nil {
			if t.windows >= t.cfg.MaxPartitions {
				t.dropped.Add(1)
				continue
			}
			if parts == nil {
				parts = map[tp]*window{}
				t.groups[g] = parts
			}
			w = &window{tsOffset: -1}
			parts[s.k] = w
			t.windows++
		}
		if n := len(w.entries); n > 0 && s.e.At-w.entries[n-1].At < minDist {
			w.entries[n-1] = s.e
			continue
		}
		if len(w.entries) == t.cfg.Window {
			copy(w.entries, w.entries[1:])
			w.entries = w.entries[:len(w.entries)-1]
		}
		w.entries = append(w.entries, s.e)
	}
}

// snapshot copies one partition's window and cached timestamp.
func (t *Tracker) snapshot(g string, k tp) (entries []Entry, tsOffset, ts int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.groups[g][k]
	if w == nil {
		return nil, -1, 0
	}
	return append([]Entry(nil), w.entries...), w.tsOffset, w.ts
}

// cacheTimestamp remembers the timestamp of the record at offset.
func (t *Tracker) cacheTimestamp(g string, k tp, offset, ts int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if w := t.groups[g][k]; w != nil {
		w.tsOffset, w.ts = offset, ts
	}
}

// retain forgets the windows of groups not in live, and of partitions
// a live group no longer has offsets for.
func (t *Tracker) retain(live map[string]map[tp]bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for g, parts := range t.groups {
		keep, ok := live[g]
		if !ok {
			t.windows -= len(parts)
			delete(t.groups, g)
			delete(t.commits, g)
			continue
		}
		for k := range parts {
			if !keep[k] {
				delete(parts, k)
				t.windows--
			}
		}
	}
}

// commitCount is the number of commits observed for g since start.
func (t *Tracker) commitCount(g string) int64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.commits[g]
}
