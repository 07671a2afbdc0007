package delay

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Errors of Cancel.
var (
	ErrNotFound = errors.New("delay: no pending record there")
	ErrBusy     = errors.New("delay: the record is being delivered")
)

// Cancel cancels the pending record that produce reported at offset off
// of t.
func (s *Service) Cancel(ctx context.Context, t Target, off int64) error {
	if _, err := s.storeN(ctx, false); err != nil {
		return fmt.Errorf("%w: %s offset %d (nothing was ever held)", ErrNotFound, t, off)
	}
	p, err := s.partFor(ctx, t)
	if err != nil {
		return err
	}
	var res error
	if err := p.do(ctx, func(ctx context.Context) { res = p.cancel1(ctx, t, off) }); err != nil {
		return err
	}
	return res
}

// cancel1 runs on the worker's goroutine.
func (p *part) cancel1(ctx context.Context, t Target, off int64) error {
	p.mu.Lock()
	x := p.target(t)
	e := p.index[entryID{x, off}]
	busy := e != nil && e.busy
	p.mu.Unlock()
	if busy {
		return ErrBusy
	}
	tb := tomb{id: entryID{x, off}}
	if e != nil {
		tb.due, tb.off = e.due, e.off
	} else {
		// Not indexed: beyond the horizon, or not there at all. The
		// spans say where in the store its records may be (spans.go);
		// the last record of its key decides.
		p.mu.Lock()
		rs := spanRanges(x.spans, off)
		cutoff := p.cutoff
		p.mu.Unlock()
		key := string(EntryKey(t, off))
		live := false
		for _, r := range rs {
			err := scanLog(ctx, p.p, r[0], r[1]+1, func(o, _ int64, k, v []byte) error {
				if string(k) != key {
					return nil
				}
				live = false
				if v != nil {
					if due, err := entryDue(v); err == nil {
						live, tb.due, tb.off = true, due, o
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		// An entry due within the horizon that the index does not hold
		// was delivered (its tombstone is not in the spans).
		if !live || tb.due <= cutoff {
			return fmt.Errorf("%w: %s offset %d", ErrNotFound, t, off)
		}
	}
	if _, err := p.tombstone(ctx, []tomb{tb}); err != nil {
		return err
	}
	p.mu.Lock()
	p.finished[tb.id] = p.s.now()
	if e != nil {
		e.gone = true
		delete(p.index, tb.id)
	} else if p.farCount > 0 {
		p.farCount--
	}
	p.sum.remove(t.Topic, tb.due)
	p.mu.Unlock()
	p.s.m.cancelled.Inc()
	return nil
}

// tombstone writes the tombstones of a cancel (acks=all) and notes them
// in their targets' spans; it returns the first one's offset.
func (p *part) tombstone(ctx context.Context, tbs []tomb) (int64, error) {
	recs := make([]kmsg.Record, len(tbs))
	for i, tb := range tbs {
		recs[i] = tb.record()
	}
	b, err := buildStore(p.s.now(), recs)
	if err != nil {
		return 0, err
	}
	base, err := p.s.store.Append(ctx, p.id, b)
	if err != nil {
		return 0, err
	}
	p.mu.Lock()
	for i, tb := range tbs {
		tb.id.t.spans = noteSpan(tb.id.t.spans, tb.id.res, base+int64(i))
	}
	p.mu.Unlock()
	return base, nil
}

// Cancelled names a record CancelMessageID cancelled.
type Cancelled struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// CancelMessageID cancels every pending record of topic (any topic when
// empty) whose sluice-message-id header is id, on the store partitions
// this broker runs. It reads those partitions whole.
func (s *Service) CancelMessageID(ctx context.Context, topic, id string) ([]Cancelled, error) {
	var out []Cancelled
	for _, p := range s.owned() {
		var res []Cancelled
		var rerr error
		err := p.do(ctx, func(ctx context.Context) { res, rerr = p.cancelID(ctx, topic, id) })
		if err == nil {
			err = rerr
		}
		if err != nil {
			return out, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// cancelID reads the store partition as a stream, keeping only the
// entries that match (memory bounded by the matches, not the store).
func (p *part) cancelID(ctx context.Context, topic, id string) ([]Cancelled, error) {
	type match struct {
		c        Cancelled
		due, off int64
	}
	live := map[string]match{}
	err := scanLog(ctx, p.p, 0, p.p.HighWatermark(), func(o, _ int64, k, v []byte) error {
		kind, t, off, err := ParseKey(k)
		if err != nil || kind != kindEntry || (topic != "" && t.Topic != topic) {
			return nil
		}
		if v == nil {
			delete(live, string(k))
			return nil
		}
		e, err := DecodeEntry(v)
		if err != nil {
			return nil
		}
		for _, h := range e.Headers {
			if h.Key == HeaderMessageID && string(h.Value) == id {
				live[string(k)] = match{Cancelled{Topic: t.Topic, Partition: t.Partition, Offset: off}, e.Due, o}
			}
		}
		return nil
	})
	if err != nil || len(live) == 0 {
		return nil, err
	}
	var tbs []tomb
	var out []Cancelled
	p.mu.Lock()
	for _, m := range live {
		x := p.target(Target{m.c.Topic, m.c.Partition})
		if e := p.index[entryID{x, m.c.Offset}]; e != nil && e.busy {
			continue
		}
		tbs = append(tbs, tomb{entryID{x, m.c.Offset}, m.due, m.off})
		out = append(out, m.c)
	}
	p.mu.Unlock()
	if len(tbs) == 0 {
		return nil, nil
	}
	if _, err := p.tombstone(ctx, tbs); err != nil {
		return nil, err
	}
	p.mu.Lock()
	for _, tb := range tbs {
		p.finished[tb.id] = p.s.now()
		if e := p.index[tb.id]; e != nil {
			e.gone = true
			delete(p.index, tb.id)
		} else if p.farCount > 0 {
			p.farCount--
		}
		p.sum.remove(tb.id.t.Topic, tb.due)
	}
	p.mu.Unlock()
	p.s.m.cancelled.Add(float64(len(tbs)))
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		if out[i].Partition != out[j].Partition {
			return out[i].Partition < out[j].Partition
		}
		return out[i].Offset < out[j].Offset
	})
	return out, nil
}

// TopicStats is what `sluice delay stats` shows for one topic.
type TopicStats struct {
	Topic    string `json:"topic"`
	Pending  int64  `json:"pending"`
	FirstDue int64  `json:"first_due_ms"`
	LastDue  int64  `json:"last_due_ms"`
	// DueIn counts the pending records by how far away their due time is,
	// in the buckets of StatsBuckets.
	DueIn []int64 `json:"due_in"`
}

// StatsBuckets are the upper bounds of TopicStats.DueIn, in ms from now;
// the last bucket is everything later.
var StatsBuckets = []struct {
	Name string
	Ms   int64
}{{"overdue", 0}, {"1m", 60_000}, {"10m", 600_000}, {"1h", 3_600_000}, {"1d", 86_400_000}, {"7d", 7 * 86_400_000}, {"30d", 30 * 86_400_000}, {"later", 1 << 62}}

// Stats counts the pending records of topic (every topic when empty) on
// the store partitions this broker runs, from their in-memory summaries
// (summary.go): it reads nothing from the store. Records of transactions
// not yet committed are not counted. It also names the store partitions
// it answered for, and whether each had finished its replay (until then
// its summary is partial).
func (s *Service) Stats(ctx context.Context, topic string) (StatsAnswer, error) {
	now := s.now()
	by := map[string]*TopicStats{}
	ans := StatsAnswer{Partitions: []int32{}}
	s.mu.Lock()
	ans.StorePartitions = s.n
	s.mu.Unlock()
	for _, p := range s.owned() {
		ans.Partitions = append(ans.Partitions, p.id)
		select {
		case <-p.ready:
		default:
			ans.Loading = append(ans.Loading, p.id)
		}
		p.mu.Lock()
		p.sum.merge(by, topic, now)
		p.mu.Unlock()
	}
	slices.Sort(ans.Partitions)
	slices.Sort(ans.Loading)
	ans.Topics = make([]TopicStats, 0, len(by))
	for _, ts := range by {
		ans.Topics = append(ans.Topics, *ts)
	}
	sortStats(ans.Topics)
	return ans, ctx.Err()
}

// StatsAnswer is Stats' answer: per topic, and which store partitions it
// covers (in a cluster each broker answers for those it leads; `sluice
// delay stats` asks every broker and merges).
type StatsAnswer struct {
	Topics          []TopicStats `json:"topics"`
	StorePartitions int32        `json:"store_partitions"`
	Partitions      []int32      `json:"partitions"`
	Loading         []int32      `json:"loading,omitempty"`
}
