package delay

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// chunk is one delivery batch: entries of one target, in reserved-offset
// order, sent with the store partition's producer id from firstSeq on.
// Once its marker is durable it is sent, again and again if need be,
// exactly as first built, until it is in the target (or the target is
// gone).
type chunk struct {
	t        *target
	es       []*entry
	firstSeq int32
	batch    []byte
	waiting  []*entry // later due entries of the target, held back meanwhile
	resumed  bool     // from a marker found on load: sent exactly as it names
}

func incSeq(s, n int32) int32 { return batch.IncrementSequence(s, n) }

// deliveryBatchBytes bounds the records of one delivery batch, under the
// default max.message.bytes of 1 MiB.
const deliveryBatchBytes = 900 << 10

// deliver delivers due entries: at most one chunk per target per round
// (a target's newest marker must name its only unconfirmed batch).
func (p *part) deliver(ctx context.Context, due []*entry) {
	by := map[*target][]*entry{}
	for _, e := range due {
		by[e.t] = append(by[e.t], e)
	}
	var chunks []*chunk
	var back, drop []*entry
	for x, es := range by {
		if x.retry != nil {
			x.retry.waiting = append(x.retry.waiting, es...)
			continue
		}
		slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(a.res, b.res) })
		if n := p.s.cfg.BatchRecords; len(es) > n {
			back = append(back, es[n:]...)
			es = es[:n]
		}
		if !x.seqKnown {
			tp, err := p.s.e.Partition(x.Topic, x.Partition)
			if errors.Is(err, log.ErrUnknownTopicOrPartition) {
				drop = append(drop, es...)
				continue
			}
			if err != nil {
				back = append(back, es...)
				continue
			}
			x.nextSeq = 0
			if !tp.Led() && p.s.remote != nil {
				last, ok, err := p.s.remote.lastSeq(ctx, x.Target, p.pid)
				if err != nil {
					back = append(back, es...)
					continue
				}
				if ok {
					x.nextSeq = incSeq(last, 1)
				}
			} else {
				for _, pi := range tp.Producers() {
					if pi.ProducerID == p.pid && pi.Epoch == 0 && pi.LastSequence >= 0 {
						x.nextSeq = incSeq(pi.LastSequence, 1)
					}
				}
			}
			x.seqKnown = true
		}
		chunks = append(chunks, &chunk{t: x, es: es, firstSeq: x.nextSeq})
	}
	if len(back) > 0 {
		p.mu.Lock()
		for _, e := range back {
			p.w.put(e)
		}
		p.mu.Unlock()
	}
	if len(drop) > 0 {
		p.finish(drop, true)
	}
	if len(chunks) == 0 {
		p.flushTombs(ctx)
		return
	}
	if err := p.build(ctx, chunks); err != nil {
		p.putBack(chunks)
		p.s.log.Warn("delay: reading due entries failed", "partition", p.id, "err", err)
		return
	}
	// The markers first: from here on each chunk is sent as built. The
	// tombstones of earlier deliveries go ahead of them in the same
	// batch, so a target's new marker is never durable without them.
	p.mu.Lock()
	tombs := p.tombs
	p.tombs = nil
	p.mu.Unlock()
	var recs []kmsg.Record
	for _, tb := range tombs {
		recs = append(recs, tb.record())
	}
	for _, c := range chunks {
		m := Marker{ProducerID: p.pid, FirstSeq: c.firstSeq, Entries: make([]MarkerEntry, len(c.es))}
		for i, e := range c.es {
			m.Entries[i] = MarkerEntry{StoreOffset: e.off, Reserved: e.res}
		}
		recs = append(recs, kmsg.Record{Key: markerKey(c.t.Target), Value: AppendMarker(nil, &m)})
	}
	mb, err := buildStore(p.s.now(), recs)
	if err == nil {
		_, err = p.s.store.Append(ctx, p.id, mb)
	}
	if err != nil {
		p.mu.Lock()
		p.tombs = append(tombs, p.tombs...)
		p.mu.Unlock()
		p.putBack(chunks)
		p.s.log.Warn("delay: writing delivery markers failed", "partition", p.id, "err", err)
		return
	}
	p.mu.Lock()
	for _, c := range chunks {
		for _, e := range c.es {
			e.busy = true
		}
		c.t.retry = c
		c.t.nextSeq = incSeq(c.firstSeq, int32(len(c.es)))
	}
	p.mu.Unlock()
	p.send(ctx, chunks)
}

// putBack returns the entries of chunks that never got a marker.
func (p *part) putBack(chunks []*chunk) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range chunks {
		for _, e := range c.es {
			p.w.soon = append(p.w.soon, e)
			p.w.n++
		}
	}
}

// build reads the chunks' records from the store and encodes each chunk's
// batch. An entry missing from the store (never, short of a cut log) is
// left out; a chunk left empty is dropped.
func (p *part) build(ctx context.Context, chunks []*chunk) error {
	var offs []int64
	for _, c := range chunks {
		if c.batch != nil {
			continue
		}
		for _, e := range c.es {
			offs = append(offs, e.off)
		}
	}
	slices.Sort(offs)
	got, err := readEntries(ctx, p.p, offs)
	if err != nil {
		return err
	}
	for _, c := range chunks {
		if c.batch != nil {
			continue
		}
		recs := make([]kmsg.Record, 0, len(c.es))
		first := int64(0)
		size := 0
		for i, e := range c.es {
			v, ok := got[e.off]
			if !ok {
				return fmt.Errorf("delay: entry of %s at offset %d missing from %s-%d at %d", c.t, e.res, Topic, p.id, e.off)
			}
			// A delivery batch stays under the target's usual limits
			// (max.message.bytes is 1 MiB by default); the rest waits
			// for the next round.
			size += len(v.Key) + len(v.Value) + 32
			for _, h := range v.Headers {
				size += len(h.Key) + len(h.Value) + 8
			}
			if i > 0 && size > deliveryBatchBytes && !c.resumed {
				p.mu.Lock()
				for _, e := range c.es[i:] {
					p.w.soon = append(p.w.soon, e)
					p.w.n++
				}
				p.mu.Unlock()
				c.es = c.es[:i]
				break
			}
			if i == 0 || e.due < first {
				first = e.due
			}
		}
		for i, e := range c.es {
			v := got[e.off]
			recs = append(recs, kmsg.Record{OffsetDelta: int32(i), TimestampDelta64: v.Due - first,
				Key: v.Key, Value: v.Value, Headers: stripDelay(v.Headers)})
		}
		h := batch.Header{Magic: 2, LastOffsetDelta: int32(len(recs) - 1), FirstTimestamp: first, MaxTimestamp: first,
			ProducerID: p.pid, ProducerEpoch: 0, BaseSequence: c.firstSeq, LeaderEpoch: -1}
		if c.batch, err = batch.Rebuild(h, recs); err != nil {
			return err
		}
	}
	return nil
}

// send appends each chunk to its target and waits until durable; a chunk
// that made it (or whose target is gone) is finished, others stay queued
// as their target's retry.
func (p *part) send(ctx context.Context, chunks []*chunk) {
	type sent struct {
		c   *chunk
		tp  *log.Partition
		res log.AppendResult
		err error
	}
	out := make([]sent, len(chunks))
	for i, c := range chunks {
		out[i].c = c
		out[i].tp, out[i].err = p.s.e.Partition(c.t.Topic, c.t.Partition)
		if out[i].err != nil {
			continue
		}
		if !out[i].tp.Led() && p.s.remote != nil {
			// Led by another broker: a Produce with the same producer id
			// and sequences, deduplicated there as here.
			_, out[i].err = p.s.remote.produce(ctx, c.t.Topic, c.t.Partition, c.batch)
			out[i].tp = nil
			continue
		}
		out[i].res, out[i].err = out[i].tp.AppendHeld(ctx, c.batch)
	}
	for i := range out {
		o := &out[i]
		if o.err == nil && o.tp != nil {
			o.err = o.tp.WaitDurable(ctx, o.res, o.res.BaseOffset+int64(len(o.c.es))-1)
		}
		switch {
		case o.err == nil:
			p.done1(o.c, false)
		case errors.Is(o.err, log.ErrUnknownTopicOrPartition):
			p.done1(o.c, true)
		case errors.Is(o.err, log.ErrOutOfOrderSequence) || errors.Is(o.err, kerr.OutOfOrderSequenceNumber):
			p.s.log.Warn("delay: the target refused the delivery's sequence; taking its sequence again",
				"target", o.c.t.Target, "first_sequence", o.c.firstSeq, "records", len(o.c.es), "err", o.err)
			p.reseq(o.c)
		default:
			if ctx.Err() == nil {
				p.s.log.Warn("delay: delivery failed; will retry", "target", o.c.t.Target, "records", len(o.c.es), "err", o.err)
			}
		}
	}
}

// reseq gives up a chunk its target refused as out of order: its
// sequence was taken from a producer state that was not the target's
// current one. The target did not append it (P_s has one batch in flight
// per target, so a batch it did append is answered as a duplicate), so its
// entries go back to be delivered in a new chunk, under a new marker, with
// the sequence the target's state gives then.
func (p *part) reseq(c *chunk) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c.t.retry = nil
	c.t.seqKnown = false
	for _, e := range c.es {
		e.busy = false
	}
	for _, e := range append(c.es, c.waiting...) {
		p.w.soon = append(p.w.soon, e)
		p.w.n++
	}
}

// done1 finishes a chunk that is in its target (or dropped).
func (p *part) done1(c *chunk, dropped bool) {
	p.mu.Lock()
	c.t.retry = nil
	for _, e := range c.waiting {
		p.w.soon = append(p.w.soon, e)
		p.w.n++
	}
	p.mu.Unlock()
	p.finish(c.es, dropped)
}

// finish removes delivered (or dropped) entries from the index and queues
// their tombstones.
func (p *part) finish(es []*entry, dropped bool) {
	now := p.s.now()
	p.mu.Lock()
	for _, e := range es {
		e.gone, e.busy = true, false
		id := entryID{e.t, e.res}
		if p.index[id] == e {
			delete(p.index, id)
		}
		p.tombs = append(p.tombs, tomb{id, e.due, e.off})
		p.finished[id] = now
		p.sum.remove(e.t.Topic, e.due)
	}
	p.mu.Unlock()
	if dropped {
		p.s.m.dropped.Add(float64(len(es)))
		return
	}
	p.s.m.delivered.Add(float64(len(es)))
	for _, e := range es {
		p.s.m.lateness.Observe(float64(max(0, now-e.due)) / 1000)
	}
}

// flushTombs writes the queued tombstones; false while some are not
// durable (no new marker may be written until then: a target's newest
// marker must name its only batch not yet tombstoned).
func (p *part) flushTombs(ctx context.Context) bool {
	p.mu.Lock()
	ids := p.tombs
	p.tombs = nil
	p.mu.Unlock()
	if len(ids) == 0 {
		return true
	}
	for len(ids) > 0 {
		n := min(len(ids), 5000)
		recs := make([]kmsg.Record, n)
		for i, tb := range ids[:n] {
			recs[i] = tb.record()
		}
		b, err := buildStore(p.s.now(), recs)
		if err == nil {
			_, err = p.s.store.Append(ctx, p.id, b)
		}
		if err != nil {
			p.mu.Lock()
			p.tombs = append(ids, p.tombs...)
			p.mu.Unlock()
			if ctx.Err() == nil {
				p.s.log.Warn("delay: writing tombstones failed; will retry", "partition", p.id, "err", err)
			}
			return false
		}
		ids = ids[n:]
	}
	return true
}

// retryChunks sends again the chunks that failed or that load found.
func (p *part) retryChunks(ctx context.Context) {
	var cs []*chunk
	p.mu.Lock()
	for _, x := range p.targets {
		if x.retry != nil {
			cs = append(cs, x.retry)
		}
	}
	p.mu.Unlock()
	if len(cs) == 0 {
		return
	}
	if err := p.build(ctx, cs); err != nil {
		p.s.log.Warn("delay: reading entries to resend failed", "partition", p.id, "err", err)
		return
	}
	p.send(ctx, cs)
}

func (p *part) hasRetries() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, x := range p.targets {
		if x.retry != nil {
			return true
		}
	}
	return len(p.tombs) > 0
}

// stripDelay drops the delay headers from a delivered record: it is due,
// and a broker it is produced to (cluster mode) must not hold it again.
func stripDelay(hs []kmsg.Header) []kmsg.Header {
	out := hs[:0:0]
	for _, h := range hs {
		if h.Key != HeaderDeliverAt && h.Key != HeaderDelayMs {
			out = append(out, h)
		}
	}
	return out
}
