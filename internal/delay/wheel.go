package delay

import (
	"container/heap"
	"math"
)

// entry is one pending record as the index holds it: no payload, which
// stays in the store partition at off.
type entry struct {
	due  int64 // Unix ms
	off  int64 // offset in the store partition
	t    *target
	res  int64 // offset reserved in the target partition
	gone bool  // delivered, cancelled or evicted while still in a bucket
	busy bool  // in a delivery chunk (retried until it succeeds)
}

// wheel is a hierarchical timing wheel after Kafka's purgatory
// (kafka.utils.timer.TimingWheel): level i has size buckets of tick*size^i
// ms each; an entry goes into the finest level whose span still covers it,
// and a bucket of a coarse level is flushed into finer ones when its time
// comes. Only non-empty buckets are in the queue (Kafka's DelayQueue), so
// advancing over an idle hour costs nothing, and adding or expiring an
// entry is O(1) plus a heap operation per bucket, not per entry.
//
// It is not safe for concurrent use: the store partition's lock guards it.
type wheel struct {
	levels []level
	q      bucketQueue
	soon   []*entry // due within a tick of a flushed level-0 bucket, not yet now
	n      int      // entries held, gone ones included until flushed
}

type level struct {
	tick, interval, cur int64
	buckets             []bucket
}

type bucket struct {
	exp int64 // ms at which the bucket is due; -1 when empty
	es  []*entry
	at  int // index in the queue, -1 when not queued
}

// newWheel makes a wheel starting at now with enough levels to cover span.
func newWheel(tick, size, now, span int64) *wheel {
	w := &wheel{}
	for t := tick; ; t *= size {
		l := level{tick: t, interval: t * size, cur: now - now%t, buckets: make([]bucket, size)}
		for i := range l.buckets {
			l.buckets[i].exp, l.buckets[i].at = -1, -1
		}
		w.levels = append(w.levels, l)
		if l.interval >= span || l.interval > math.MaxInt64/size/2 {
			break
		}
	}
	return w
}

// add places e; false when e is due within a tick already (the caller
// delivers it, or keeps it in soon until its time).
func (w *wheel) add(e *entry) bool {
	for i := range w.levels {
		l := &w.levels[i]
		if e.due < l.cur+l.tick {
			if i == 0 {
				return false
			}
			break // cannot happen: the finer level would have taken it
		}
		if e.due < l.cur+l.interval || i == len(w.levels)-1 {
			v := e.due / l.tick
			if e.due >= l.cur+l.interval {
				// Beyond the top level: parked in its last bucket and
				// placed again when that bucket comes due.
				v = (l.cur + l.interval - l.tick) / l.tick
			}
			b := &l.buckets[v%int64(len(l.buckets))]
			b.es = append(b.es, e)
			w.n++
			if exp := v * l.tick; b.exp != exp {
				if b.at >= 0 {
					heap.Remove(&w.q, b.at)
				}
				b.exp = exp
				heap.Push(&w.q, b)
			}
			return true
		}
	}
	return false
}

// put is add, with an entry due already kept in soon.
func (w *wheel) put(e *entry) {
	if !w.add(e) {
		w.soon = append(w.soon, e)
		w.n++
	}
}

func (w *wheel) advanceClock(t int64) {
	for i := range w.levels {
		l := &w.levels[i]
		if t >= l.cur+l.tick {
			l.cur = t - t%l.tick
		}
	}
}

// expire appends to out the entries due at now (due <= now), in no
// particular order, and drops gone ones.
func (w *wheel) expire(now int64, out []*entry) []*entry {
	for w.q.Len() > 0 && w.q[0].exp <= now {
		b := heap.Pop(&w.q).(*bucket)
		w.advanceClock(b.exp)
		es := b.es
		b.es, b.exp = nil, -1
		w.n -= len(es)
		for _, e := range es {
			if e.gone {
				continue
			}
			w.put(e)
		}
	}
	w.advanceClock(now)
	keep := w.soon[:0]
	for _, e := range w.soon {
		switch {
		case e.gone:
			w.n--
		case e.due <= now:
			out = append(out, e)
			w.n--
		default:
			keep = append(keep, e)
		}
	}
	clear(w.soon[len(keep):])
	w.soon = keep
	return out
}

// next is when expire next has something to do; MaxInt64 when empty.
func (w *wheel) next() int64 {
	t := int64(math.MaxInt64)
	if w.q.Len() > 0 {
		t = w.q[0].exp
	}
	for _, e := range w.soon {
		t = min(t, e.due)
	}
	return t
}

// bucketQueue is a min-heap of buckets by expiry.
type bucketQueue []*bucket

func (q bucketQueue) Len() int           { return len(q) }
func (q bucketQueue) Less(i, j int) bool { return q[i].exp < q[j].exp }
func (q bucketQueue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].at, q[j].at = i, j
}
func (q *bucketQueue) Push(x any) {
	b := x.(*bucket)
	b.at = len(*q)
	*q = append(*q, b)
}
func (q *bucketQueue) Pop() any {
	old := *q
	b := old[len(old)-1]
	old[len(old)-1] = nil
	b.at = -1
	*q = old[:len(old)-1]
	return b
}
