package delay

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"time"
)

// scan reads the store partition from its start to its high watermark
// and indexes the live entries due within the horizon; later ones are
// counted, and the earliest of them decides when the next scan runs. The
// first scan (load) also builds the summary (summary.go), notes the
// entries of transactions not decided yet (txn.go), and finds the markers
// of deliveries a crash may have cut short and queues them to be sent
// again with the same sequences. Deliveries and cancels run on the same
// goroutine, so nothing but Hold's additions (which merge by key) changes
// the store meanwhile.
func (p *part) scan(ctx context.Context, first bool) error {
	start := time.Now()
	now := p.s.now()
	// Read as a read_committed consumer: below lso every transaction is
	// decided. Those pending in txnPend below it are resolved first, so
	// that nothing is both read here and resolved later.
	lso := p.p.LastStableOffset()
	if !first {
		p.resolveTxns(lso)
	}
	cut := now + p.s.cfg.Horizon.Milliseconds()
	lim := p.s.cfg.MemoryEntries

	p.mu.Lock()
	if !first {
		p.cutoff = max(p.cutoff, cut)
	}
	p.farMin, p.farCount = math.MaxInt64, 0
	p.mu.Unlock()

	interned := map[Target]*target{}
	intern := func(t Target) *target {
		if x := interned[t]; x != nil {
			return x
		}
		p.mu.Lock()
		x := p.target(t)
		p.mu.Unlock()
		interned[t] = x
		return x
	}
	loc := map[entryID]*entry{}
	markers := map[*target]Marker{}
	finished := map[entryID]int64{}
	farMin, farCount := int64(math.MaxInt64), int64(0)
	// The first scan builds the summary: entries beyond the horizon as
	// they are read, the others from loc at the end. A tombstone whose
	// entry is not in loc but was due beyond the horizon is of an entry
	// read here (which then comes out) or of one compaction removed: its
	// entry's offset is looked at again at the end to tell.
	var sum summary
	type farTomb struct {
		topic    string
		due, off int64
	}
	var farTombs []farTomb
	var undecided []*pendTxn
	spans := map[*target][]span{}
	shrink := func() {
		dues := make([]int64, 0, len(loc))
		for _, e := range loc {
			dues = append(dues, e.due)
		}
		slices.Sort(dues)
		cut = dues[lim/2]
		for id, e := range loc {
			if e.due > cut {
				delete(loc, id)
				farMin = min(farMin, e.due)
				farCount++
				spans[e.t] = noteSpan(spans[e.t], e.res, e.off)
				if first {
					sum.add(e.t.Topic, e.due)
				}
			}
		}
	}
	hw := p.p.HighWatermark()
	err := scanStore(ctx, p.p, 0, hw, lso, func(r *storeRec) error {
		kind, t, res, err := ParseKey(r.key)
		if err != nil {
			p.s.log.Warn("delay store: skipping a record", "partition", p.id, "offset", r.off, "err", err)
			return nil
		}
		x := intern(t)
		if kind == kindMarker {
			if r.value == nil {
				delete(markers, x)
			} else if m, err := DecodeMarker(r.value); err == nil {
				markers[x] = m
			}
			return nil
		}
		id := entryID{x, res}
		if r.value == nil {
			if first && r.ts >= now-finishedKeep.Milliseconds() {
				finished[id] = r.ts
			}
			if loc[id] != nil {
				delete(loc, id)
			} else {
				if farCount > 0 {
					farCount--
				}
				// Without a header (written before it existed) the
				// tombstone may be of an entry beyond the horizon too.
				due, off, ok, err := tombInfo(r.headers)
				if !ok || err != nil || due > cut {
					spans[x] = noteSpan(spans[x], res, r.off)
				}
				if first && ok && err == nil && due > cut {
					farTombs = append(farTombs, farTomb{t.Topic, due, off})
				}
			}
			return nil
		}
		due, err := entryDue(r.value)
		if err != nil {
			p.s.log.Warn("delay store: skipping an entry", "partition", p.id, "offset", r.off, "err", err)
			return nil
		}
		if r.txnPID >= 0 {
			if first {
				undecided = append(undecided, &pendTxn{e: &entry{due: due, off: r.off, t: x, res: res}, pid: r.txnPID})
			}
			return nil
		}
		if due > cut {
			farMin = min(farMin, due)
			farCount++
			spans[x] = noteSpan(spans[x], res, r.off)
			if first {
				sum.add(t.Topic, due)
			}
			return nil
		}
		if e := loc[id]; e != nil {
			e.off, e.due = r.off, due
		} else {
			loc[id] = &entry{due: due, off: r.off, t: x, res: res}
		}
		if len(loc) > lim {
			shrink()
		}
		return nil
	})
	if err == nil && len(farTombs) > 0 {
		offs := make([]int64, len(farTombs))
		for i, ft := range farTombs {
			offs[i] = ft.off
		}
		slices.Sort(offs)
		var got map[int64]Entry
		if got, err = readEntries(ctx, p.p, slices.Compact(offs)); err == nil {
			for _, ft := range farTombs {
				if e, ok := got[ft.off]; ok && e.Due == ft.due {
					sum.remove(ft.topic, ft.due)
				}
			}
		}
	}
	if err != nil {
		return err
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutoff = cut
	for _, x := range p.targets {
		// What this scan read, and what was added beyond it meanwhile.
		x.spans = append(spans[x], keepSpansFrom(x.spans, hw)...)
	}
	for id, e := range loc {
		if first {
			sum.add(id.t.Topic, e.due)
		}
		if p.index[id] == nil {
			p.index[id] = e
			if p.loaded {
				p.w.put(e)
			}
		}
	}
	if first {
		for _, e := range p.index {
			p.w.put(e)
		}
		// Entries Hold added meanwhile beyond what the scan read.
		for _, e := range p.preload {
			if e.off >= hw {
				sum.add(e.t.Topic, e.due)
			}
		}
		p.preload = nil
		p.sum = sum
		// The scan decided every transaction below lso; those above
		// wait, whether Hold or the scan found them.
		for id, pt := range p.txnPend {
			if pt.e.off < lso {
				delete(p.txnPend, id)
			}
		}
		for _, pt := range undecided {
			id := entryID{pt.e.t, pt.e.res}
			if p.txnPend[id] == nil {
				p.txnPend[id] = pt
			}
		}
		p.txnMin = math.MaxInt64
		for _, pt := range p.txnPend {
			p.txnMin = min(p.txnMin, pt.e.off)
		}
		p.loaded = true
		for id, ts := range finished {
			p.finished[id] = ts
		}
		for x, m := range markers {
			p.resume(x, m)
		}
		close(p.ready)
	}
	p.farMin = min(p.farMin, farMin)
	p.farCount += farCount
	p.evict()
	p.lastScan, p.scanDur = time.Now(), time.Since(start)
	lvl := slog.LevelDebug
	if first {
		lvl = slog.LevelInfo
	}
	p.s.log.Log(ctx, lvl, "delay store scanned", "partition", p.id, "indexed", len(p.index), "far", p.farCount,
		"pending", p.sum.total, "undecided", len(p.txnPend), "took", p.scanDur)
	return nil
}

// resume queues the delivery a marker names when its entries are still
// pending: sent again with the marker's sequences, it is appended if the
// crash came before the append and dropped as a duplicate by the target's
// producer state if after. mu held.
func (p *part) resume(x *target, m Marker) {
	es := make([]*entry, 0, len(m.Entries))
	for _, me := range m.Entries {
		if e := p.index[entryID{x, me.Reserved}]; e != nil {
			es = append(es, e)
		}
	}
	if len(es) == 0 {
		return // delivered and tombstoned
	}
	if len(es) != len(m.Entries) {
		// Tombstones are written in one batch, so this does not happen;
		// sending fewer records under the same sequences would not match.
		p.s.log.Error("delay store: a marker's entries are partly gone; delivering the rest anew",
			"target", x.Target, "marker", len(m.Entries), "pending", len(es))
		return
	}
	for _, e := range es {
		e.busy = true
	}
	x.retry = &chunk{t: x, es: es, firstSeq: m.FirstSeq, resumed: true}
	x.nextSeq = incSeq(m.FirstSeq, int32(len(es)))
	x.seqKnown = true
}
