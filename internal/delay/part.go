package delay

import (
	"context"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/sluice-mq/sluice/internal/log"
)

// part is one store partition's worker: its index (the entries due within
// the horizon, in a timing wheel) and the goroutine that loads the
// partition, delivers due entries and runs cancels. Deliveries, scans and
// cancels all run on that goroutine, one at a time; Hold adds entries
// from produce goroutines under mu.
type part struct {
	s      *Service
	id     int32
	p      *log.Partition
	pid    int64
	cancel context.CancelFunc
	done   chan struct{}
	ready  chan struct{} // closed once the first scan is in the index
	wake   chan struct{}
	ops    chan func(context.Context)

	mu       sync.Mutex
	targets  map[Target]*target
	index    map[entryID]*entry
	w        *wheel
	cutoff   int64 // entries due later are in the log only
	farMin   int64 // earliest due among those, MaxInt64 if none known
	farCount int64 // how many there are, as of the last scan (approximate)
	loaded   bool
	lastScan time.Time
	scanDur  time.Duration
	tombs    []tomb // delivered, cancelled or aborted, tombstone not yet written
	sum      summary
	// preload holds the entries Hold added before the first scan was in,
	// which the scan may or may not have read (summary.go).
	preload []*entry
	// txnPend holds the entries of transactions not decided yet (txn.go),
	// txnMin the lowest store offset among them.
	txnPend map[entryID]*pendTxn
	txnMin  int64
	txnMu   sync.Mutex // appendTxn: a sequence and its append as one step
	// finished holds the entries delivered or cancelled in the last
	// finishedKeep (ms when), so that an idempotent producer's retry of a
	// batch whose records were delivered meanwhile does not hold them again.
	finished map[entryID]int64
}

// finishedKeep is how long finished remembers an entry: longer than any
// producer keeps retrying a batch (delivery.timeout.ms, 2 minutes by
// default).
const finishedKeep = 15 * time.Minute

// known reports whether t's entry at res is pending or recently finished.
func (p *part) known(x *target, res int64) bool {
	id := entryID{x, res}
	if p.index[id] != nil {
		return true
	}
	if p.txnPend[id] != nil {
		return true
	}
	_, ok := p.finished[id]
	return ok
}

// finishedMax bounds finished per store partition (about 50 bytes an
// entry): at sustained high delivery rates the window shrinks below
// finishedKeep rather than memory growing.
const finishedMax = 200_000

// prune forgets finished entries older than finishedKeep, or than less
// when there are more than finishedMax; mu held.
func (p *part) prune(now int64) {
	keep := finishedKeep.Milliseconds()
	for {
		for id, ts := range p.finished {
			if ts < now-keep {
				delete(p.finished, id)
			}
		}
		if len(p.finished) <= finishedMax || keep < 1000 {
			return
		}
		keep /= 2
	}
}

func newPart(s *Service, id int32, p *log.Partition, cancel context.CancelFunc) *part {
	now := s.now()
	return &part{s: s, id: id, p: p, pid: ProducerIDBase + int64(id), cancel: cancel,
		done: make(chan struct{}), ready: make(chan struct{}), wake: make(chan struct{}, 1), ops: make(chan func(context.Context)),
		targets: map[Target]*target{}, index: map[entryID]*entry{}, finished: map[entryID]int64{},
		txnPend: map[entryID]*pendTxn{}, txnMin: math.MaxInt64,
		w:      newWheel(s.cfg.Tick.Milliseconds(), 512, now, (s.cfg.MaxDelay + s.cfg.Horizon).Milliseconds()),
		cutoff: math.MaxInt64, farMin: math.MaxInt64}
}

// target interns t; mu held.
func (p *part) target(t Target) *target {
	if x := p.targets[t]; x != nil {
		return x
	}
	x := &target{Target: t}
	p.targets[t] = x
	return x
}

// add indexes entries just appended to the store by Hold.
func (p *part) add(t Target, es []*entry) {
	p.mu.Lock()
	x := p.target(t)
	early := false
	for _, e := range es {
		e.t = x
		switch {
		case !p.loaded:
			p.index1(e, &early)
			p.preload = append(p.preload, e)
		case p.index1(e, &early):
			p.sum.add(t.Topic, e.due)
		}
	}
	p.mu.Unlock()
	if early {
		p.poke()
	}
}

// addHeld is add for the records Hold just appended to the store from
// base on: an entry is allocated only for those the index keeps (due
// within the horizon, or before the first scan is in); one due later is
// only counted, and its values are not kept.
func (p *part) addHeld(t Target, hs []held, bases []int64, base int64) {
	p.mu.Lock()
	x := p.target(t)
	early := false
	for i := range hs {
		e := entry{due: hs[i].due, off: base + int64(i), res: bases[hs[i].batch] + int64(hs[i].delta), t: x}
		if p.loaded && e.due > p.cutoff {
			p.countFar(e) // counted, not kept
			p.sum.add(t.Topic, e.due)
			continue
		}
		ne := new(entry)
		*ne = e
		switch {
		case !p.loaded:
			p.index1(ne, &early)
			p.preload = append(p.preload, ne)
		case p.index1(ne, &early):
			p.sum.add(t.Topic, ne.due)
		}
	}
	p.mu.Unlock()
	if early {
		p.poke()
	}
}

// index1 puts e in the index (or counts it as far); mu held. It reports
// whether e is new (a far entry always is: the log alone knows).
func (p *part) index1(e *entry, early *bool) bool {
	if e.due > p.cutoff {
		p.countFar(*e)
		return true
	}
	id := entryID{e.t, e.res}
	if old := p.index[id]; old != nil {
		old.off = e.off // written again (a producer's retry): same record
		return false
	}
	p.index[id] = e
	if p.loaded {
		p.w.put(e)
		if e.due <= p.w.next() {
			*early = true
		}
	}
	return true
}

// countFar notes an entry due beyond the horizon: the log alone keeps it.
// mu held.
func (p *part) countFar(e entry) {
	p.farMin = min(p.farMin, e.due)
	p.farCount++
	e.t.spans = noteSpan(e.t.spans, e.res, e.off)
}

func (p *part) poke() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

func (p *part) pendingCount() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sum.total
}

// run is the worker's goroutine.
func (p *part) run(ctx context.Context) {
	defer close(p.done)
	log := p.s.log.With("partition", p.id)
	for {
		err := p.scan(ctx, true)
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			return
		}
		log.Warn("delay store load failed; retrying", "err", err)
		if !sleep(ctx, time.Second) {
			return
		}
	}
	tick := p.s.cfg.Tick
	var due []*entry
	lastPrune := p.s.now()
	for ctx.Err() == nil {
		p.retryChunks(ctx)
		p.resolveTxns(p.p.LastStableOffset())
		now := p.s.now()
		hw := p.p.HighWatermark()
		p.mu.Lock()
		if now-lastPrune > time.Minute.Milliseconds() || len(p.finished) > 2*finishedMax {
			p.prune(now)
			lastPrune = now
		}
		due = p.w.expire(now, due[:0])
		// An entry is delivered only once its store record is durable: a
		// crash must not take back a record that was already delivered.
		keep := due[:0]
		for _, e := range due {
			switch {
			case e.gone || e.busy:
			case e.off >= hw:
				p.w.soon = append(p.w.soon, e)
				p.w.n++
			default:
				keep = append(keep, e)
			}
		}
		due = keep
		next := p.w.next()
		rescan := p.farMin != math.MaxInt64 && now >= p.farMin-p.lead() && time.Since(p.lastScan) >= time.Second
		p.mu.Unlock()
		if len(due) > 0 {
			// The previous round's tombstones go in the same batch as
			// this round's markers (deliver), ahead of them.
			p.deliver(ctx, due)
			clear(due)
			continue
		}
		if !p.flushTombs(ctx) {
			sleep(ctx, 200*time.Millisecond)
			continue
		}
		if rescan {
			if err := p.scan(ctx, false); err != nil && ctx.Err() == nil {
				log.Warn("delay store scan failed", "err", err)
			}
			continue
		}
		wait := time.Second
		if next != math.MaxInt64 {
			wait = min(wait, max(time.Duration(next-now)*time.Millisecond, tick))
		}
		if p.hasRetries() {
			wait = min(wait, 200*time.Millisecond)
		}
		if p.hasTxns() {
			// A transaction's marker is not announced to the worker:
			// the last stable offset is looked at again soon.
			wait = min(wait, txnPoll)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
		case <-p.wake:
		case op := <-p.ops:
			op(ctx)
		case <-t.C:
		}
		t.Stop()
	}
}

// txnPoll is how often the worker looks for the outcome of transactions
// whose held records it has pending.
const txnPoll = 50 * time.Millisecond

// lead is how long before the earliest far entry a scan starts; mu held.
func (p *part) lead() int64 {
	return max(5000, 4*p.scanDur.Milliseconds())
}

// do runs op on the worker's goroutine and waits for it.
func (p *part) do(ctx context.Context, op func(context.Context)) error {
	done := make(chan struct{})
	f := func(ctx context.Context) { op(ctx); close(done) }
	select {
	case p.ops <- f:
	case <-ctx.Done():
		return ctx.Err()
	case <-p.done:
		return ErrNotOwned
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// evict shrinks the in-memory index to half of MemoryEntries by lowering
// the cutoff; mu held.
func (p *part) evict() {
	lim := p.s.cfg.MemoryEntries
	if len(p.index) <= lim {
		return
	}
	dues := make([]int64, 0, len(p.index))
	for _, e := range p.index {
		dues = append(dues, e.due)
	}
	slices.Sort(dues)
	cut := dues[lim/2]
	for id, e := range p.index {
		if e.due > cut && !e.busy {
			e.gone = true
			delete(p.index, id)
			p.farMin = min(p.farMin, e.due)
			p.farCount++
			e.t.spans = noteSpan(e.t.spans, e.res, e.off)
		}
	}
	p.cutoff = min(p.cutoff, cut)
}

// unknown keeps the held records of a retried batch that the store has
// neither pending nor recently finished.
func (p *part) unknown(t Target, hs []held, bases []int64) []held {
	p.mu.Lock()
	defer p.mu.Unlock()
	x := p.target(t)
	out := hs[:0]
	for _, h := range hs {
		if !p.known(x, bases[h.batch]+int64(h.delta)) {
			out = append(out, h)
		}
	}
	return out
}
