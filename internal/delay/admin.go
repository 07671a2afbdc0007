package delay

import (
	"context"
	"errors"
	"fmt"
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
	if e == nil {
		// Not indexed: beyond the horizon, or not there at all.
		key := string(EntryKey(t, off))
		live := false
		err := scanLog(ctx, p.p, 0, p.p.HighWatermark(), func(_, _ int64, k, v []byte) error {
			if string(k) == key {
				live = v != nil
			}
			return nil
		})
		if err != nil {
			return err
		}
		if !live {
			return fmt.Errorf("%w: %s offset %d", ErrNotFound, t, off)
		}
	}
	if err := p.tombstone(ctx, []entryID{{x, off}}); err != nil {
		return err
	}
	p.mu.Lock()
	p.finished[entryID{x, off}] = p.s.now()
	if e != nil {
		e.gone = true
		delete(p.index, entryID{x, off})
	} else if p.farCount > 0 {
		p.farCount--
	}
	p.mu.Unlock()
	p.s.m.cancelled.Inc()
	return nil
}

func (p *part) tombstone(ctx context.Context, ids []entryID) error {
	recs := make([]kmsg.Record, len(ids))
	for i, id := range ids {
		recs[i] = kmsg.Record{Key: EntryKey(id.t.Target, id.res)}
	}
	b, err := buildStore(p.s.now(), recs)
	if err != nil {
		return err
	}
	_, err = p.s.store.Append(ctx, p.id, b)
	return err
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

func (p *part) cancelID(ctx context.Context, topic, id string) ([]Cancelled, error) {
	live := map[string]Cancelled{}
	err := scanLog(ctx, p.p, 0, p.p.HighWatermark(), func(_, _ int64, k, v []byte) error {
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
				live[string(k)] = Cancelled{Topic: t.Topic, Partition: t.Partition, Offset: off}
			}
		}
		return nil
	})
	if err != nil || len(live) == 0 {
		return nil, err
	}
	var ids []entryID
	var out []Cancelled
	p.mu.Lock()
	for _, c := range live {
		x := p.target(Target{c.Topic, c.Partition})
		if e := p.index[entryID{x, c.Offset}]; e != nil && e.busy {
			continue
		}
		ids = append(ids, entryID{x, c.Offset})
		out = append(out, c)
	}
	p.mu.Unlock()
	if len(ids) == 0 {
		return nil, nil
	}
	if err := p.tombstone(ctx, ids); err != nil {
		return nil, err
	}
	p.mu.Lock()
	for _, id := range ids {
		p.finished[id] = p.s.now()
		if e := p.index[id]; e != nil {
			e.gone = true
			delete(p.index, id)
		} else if p.farCount > 0 {
			p.farCount--
		}
	}
	p.mu.Unlock()
	p.s.m.cancelled.Add(float64(len(ids)))
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
// the store partitions this broker runs, reading them whole.
func (s *Service) Stats(ctx context.Context, topic string) ([]TopicStats, error) {
	now := s.now()
	live := map[string]int64{}
	for _, p := range s.owned() {
		err := scanLog(ctx, p.p, 0, p.p.HighWatermark(), func(_, _ int64, k, v []byte) error {
			kind, t, _, err := ParseKey(k)
			if err != nil || kind != kindEntry || (topic != "" && t.Topic != topic) {
				return nil
			}
			if v == nil {
				delete(live, string(k))
				return nil
			}
			if due, err := entryDue(v); err == nil {
				live[string(k)] = due
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	by := map[string]*TopicStats{}
	for k, due := range live {
		_, t, _, _ := ParseKey([]byte(k))
		ts := by[t.Topic]
		if ts == nil {
			ts = &TopicStats{Topic: t.Topic, FirstDue: due, LastDue: due, DueIn: make([]int64, len(StatsBuckets))}
			by[t.Topic] = ts
		}
		ts.Pending++
		ts.FirstDue, ts.LastDue = min(ts.FirstDue, due), max(ts.LastDue, due)
		for i, b := range StatsBuckets {
			if due-now <= b.Ms {
				ts.DueIn[i]++
				break
			}
		}
	}
	out := make([]TopicStats, 0, len(by))
	for _, ts := range by {
		out = append(out, *ts)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out, nil
}
