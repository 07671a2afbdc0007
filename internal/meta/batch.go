package meta

import (
	"context"
	"errors"
	"sync"
)

// Batcher merges transactions that callers issue concurrently into fewer,
// larger ones, as a WAL's group commit merges writes: while one merged
// transaction is in flight the next callers queue, and the queue goes out
// as the next one. Brokers that claim, release or describe thousands of
// partitions at once (a broker's failure, a topic of many partitions) then
// cost the store a few hundred transactions a second, not one per
// partition, and each caller still sees its own transaction applied
// atomically, or not at all, as if it had been sent alone.
//
// Two transactions are merged only when that cannot change an outcome:
// their compares agree on every key they share, no key is written by both
// (except bumps: several parts' bumps of one key are one bump, as they
// commute), and neither writes a key the other compares (so the merged
// transaction is the serial execution of its parts, in some order,
// whenever all its compares hold). When a merged transaction fails a
// compare that the backend names (ConflictError), the parts that compare
// that key at that version fail with it and the others go again, merged;
// when it fails otherwise (a compare not named, a bumped key missing),
// each part is sent again on its own and gets its own answer. Parts with a
// DeletePrefix op always go alone. Other errors are every part's answer
// (ErrUnavailable keeps its meaning: each part may or may not have been
// applied).
type Batcher struct {
	md     Store
	leaser Leaser // for session parts; nil if md has no sessions

	mu      sync.Mutex
	queue   []*batchPart
	running bool

	getMu      sync.Mutex
	gets       []*getPart
	getRunning bool
}

// NewBatcher returns a Batcher sending through md (and, for TxnWithSession,
// md's Leaser).
func NewBatcher(md Store) *Batcher {
	l, _ := md.(Leaser)
	return &Batcher{md: md, leaser: l}
}

type batchPart struct {
	ctx  context.Context
	sess Session
	cmps []Compare
	ops  []Op
	done chan error
}

// Txn is Store.Txn, merged with concurrent callers' transactions.
func (b *Batcher) Txn(ctx context.Context, cmps []Compare, ops ...Op) error {
	return b.submit(&batchPart{ctx: ctx, cmps: cmps, ops: ops})
}

// TxnWithSession is Leaser.TxnWithSession, merged with concurrent callers'
// transactions on the same session.
func (b *Batcher) TxnWithSession(ctx context.Context, s Session, cmps []Compare, ops ...Op) error {
	if b.leaser == nil {
		return errors.New("meta: Batcher.TxnWithSession: the store has no sessions")
	}
	return b.submit(&batchPart{ctx: ctx, sess: s, cmps: cmps, ops: ops})
}

func (b *Batcher) submit(p *batchPart) error {
	if err := p.ctx.Err(); err != nil {
		return err
	}
	p.done = make(chan error, 1)
	b.mu.Lock()
	b.queue = append(b.queue, p)
	if !b.running {
		b.running = true
		go b.run()
	}
	b.mu.Unlock()
	select {
	case err := <-p.done:
		return err
	case <-p.ctx.Done():
		// The part may still be sent (and applied): as for a Txn whose
		// answer was lost, the caller re-reads what it needs.
		return p.ctx.Err()
	}
}

// run sends the queue, a merged transaction at a time, until it is empty.
func (b *Batcher) run() {
	for {
		b.mu.Lock()
		if len(b.queue) == 0 {
			b.running = false
			b.mu.Unlock()
			return
		}
		// Parts whose callers gave up are not sent.
		live := b.queue[:0]
		for _, p := range b.queue {
			if err := p.ctx.Err(); err != nil {
				p.done <- err
				continue
			}
			live = append(live, p)
		}
		if len(live) == 0 {
			b.queue = nil
			b.mu.Unlock()
			continue
		}
		batch, rest := takeBatch(live)
		b.queue = rest
		b.mu.Unlock()
		b.send(batch)
	}
}

// takeBatch takes the first queued part and every later one that can go
// with it, within MaxTxnOps compares and ops; it returns them and what is
// left, in queue order.
func takeBatch(queue []*batchPart) ([]*batchPart, []*batchPart) {
	first := queue[0]
	batch := []*batchPart{first}
	var rest []*batchPart
	if alone(first) {
		return batch, queue[1:]
	}
	cmpVer := map[string]int64{}
	written := map[string]bool{} // true: put or deleted; false: bumped
	ncmp, nops, size := 0, 0, 0
	addKeys := func(p *batchPart) {
		size += partBytes(p)
		for _, c := range p.cmps {
			if _, ok := cmpVer[c.Key]; !ok {
				ncmp++
			}
			cmpVer[c.Key] = c.Version
		}
		for _, op := range p.ops {
			if _, ok := written[op.Key]; ok && op.Kind == OpBump {
				continue // merged with an earlier part's bump
			}
			written[op.Key] = op.Kind != OpBump
			nops++
		}
	}
	addKeys(first)
	for _, p := range queue[1:] {
		if p.sess != first.sess || alone(p) || size+partBytes(p) > batchBytes || !fits(p, cmpVer, written, ncmp, nops) {
			rest = append(rest, p)
			continue
		}
		batch = append(batch, p)
		addKeys(p)
	}
	return batch, rest
}

// batchBytes bounds the keys and values of a merged transaction, well
// under etcd's default request limit (1.5 MiB).
const batchBytes = 512 << 10

func partBytes(p *batchPart) int {
	n := 0
	for _, c := range p.cmps {
		n += len(c.Key)
	}
	for _, op := range p.ops {
		n += len(op.Key) + len(op.Value)
	}
	return n
}

// alone: a part that is never merged.
func alone(p *batchPart) bool {
	for _, op := range p.ops {
		if op.Kind == OpDeletePrefix {
			return true
		}
	}
	return len(p.cmps) > MaxTxnOps || len(p.ops) > MaxTxnOps
}

// fits reports whether p can join a batch with these compares and writes.
func fits(p *batchPart, cmpVer map[string]int64, written map[string]bool, ncmp, nops int) bool {
	if nops+len(p.ops) > MaxTxnOps {
		return false
	}
	for _, op := range p.ops {
		if w, ok := written[op.Key]; ok && (w || op.Kind != OpBump) {
			return false
		}
		if _, ok := cmpVer[op.Key]; ok {
			return false
		}
	}
	for _, c := range p.cmps {
		v, ok := cmpVer[c.Key]
		_, w := written[c.Key]
		switch {
		case ok && v != c.Version:
			return false
		case w:
			return false
		case !ok:
			ncmp++
		}
	}
	return ncmp <= MaxTxnOps
}

// send runs one batch: merged, then part by part if its compares failed.
func (b *Batcher) send(batch []*batchPart) {
	if len(batch) == 1 {
		p := batch[0]
		p.done <- b.txn(p.ctx, p.sess, p.cmps, p.ops)
		return
	}
	seen := map[string]bool{}
	bumped := map[string]bool{}
	var cmps []Compare
	var ops []Op
	for _, p := range batch {
		for _, c := range p.cmps {
			if !seen[c.Key] {
				seen[c.Key] = true
				cmps = append(cmps, c)
			}
		}
		for _, op := range p.ops {
			if op.Kind == OpBump {
				if bumped[op.Key] {
					continue
				}
				bumped[op.Key] = true
			}
			ops = append(ops, op)
		}
	}
	ctx, cancel := mergedCtx(batch)
	err := b.txn(ctx, batch[0].sess, cmps, ops)
	cancel()
	var ce *ConflictError
	switch {
	case errors.As(err, &ce):
		// The parts that compare the failed key fail with it; the others
		// go again, merged.
		var rest []*batchPart
		for _, p := range batch {
			if comparesKey(p, ce.Key) {
				p.done <- err
			} else {
				rest = append(rest, p)
			}
		}
		if len(rest) == len(batch) {
			b.sendEach(rest) // the key is none of theirs: cannot tell
		} else if len(rest) > 0 {
			b.send(rest)
		}
	case errors.Is(err, ErrConflict), errors.Is(err, ErrNotFound):
		b.sendEach(batch)
	default:
		for _, p := range batch {
			p.done <- err
		}
	}
}

// sendEach sends every part on its own.
func (b *Batcher) sendEach(batch []*batchPart) {
	var wg sync.WaitGroup
	for _, p := range batch {
		wg.Go(func() { p.done <- b.txn(p.ctx, p.sess, p.cmps, p.ops) })
	}
	wg.Wait()
}

func comparesKey(p *batchPart, key string) bool {
	for _, c := range p.cmps {
		if c.Key == key {
			return true
		}
	}
	return false
}

func (b *Batcher) txn(ctx context.Context, s Session, cmps []Compare, ops []Op) error {
	if s != nil {
		return b.leaser.TxnWithSession(ctx, s, cmps, ops...)
	}
	return b.md.Txn(ctx, cmps, ops...)
}

// mergedCtx is a context that ends when every part's context has ended
// (or cancel is called).
func mergedCtx(batch []*batchPart) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(batch[0].ctx))
	go func() {
		for _, p := range batch {
			select {
			case <-p.ctx.Done():
			case <-ctx.Done():
				return
			}
		}
		cancel()
	}()
	return ctx, cancel
}

// GetMany reads keys as md.Get would (a missing key: Version 0, nil
// Value, no error), merged with other callers' reads into read-only
// transactions of up to MaxTxnOps keys when md is a MultiGetter, one Get
// at a time otherwise. The keys of one call are read at one revision
// unless they are more than MaxTxnOps.
func (b *Batcher) GetMany(ctx context.Context, keys []string) ([]KV, error) {
	mg, ok := b.md.(MultiGetter)
	if !ok || len(keys) > MaxTxnOps {
		out := make([]KV, len(keys))
		for i, k := range keys {
			kv, err := b.md.Get(ctx, k)
			switch {
			case err == nil:
				out[i] = kv
			case errors.Is(err, ErrNotFound):
				out[i] = KV{Key: k}
			default:
				return nil, err
			}
		}
		return out, nil
	}
	p := &getPart{ctx: ctx, keys: keys, done: make(chan getResult, 1)}
	b.getMu.Lock()
	b.gets = append(b.gets, p)
	if !b.getRunning {
		b.getRunning = true
		go b.runGets(mg)
	}
	b.getMu.Unlock()
	select {
	case r := <-p.done:
		return r.kvs, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

type getPart struct {
	ctx  context.Context
	keys []string
	done chan getResult
}

type getResult struct {
	kvs []KV
	err error
}

// runGets sends the queued reads, as many keys per transaction as fit,
// until the queue is empty.
func (b *Batcher) runGets(mg MultiGetter) {
	for {
		b.getMu.Lock()
		var batch []*getPart
		n := 0
		rest := b.gets[:0:0]
		for _, p := range b.gets {
			switch {
			case p.ctx.Err() != nil:
				p.done <- getResult{err: p.ctx.Err()}
			case n+len(p.keys) <= MaxTxnOps:
				batch = append(batch, p)
				n += len(p.keys)
			default:
				rest = append(rest, p)
			}
		}
		b.gets = rest
		if len(batch) == 0 {
			b.getRunning = false
			b.getMu.Unlock()
			return
		}
		b.getMu.Unlock()
		keys := make([]string, 0, n)
		for _, p := range batch {
			keys = append(keys, p.keys...)
		}
		parts := make([]*batchPart, len(batch))
		for i, p := range batch {
			parts[i] = &batchPart{ctx: p.ctx}
		}
		ctx, cancel := mergedCtx(parts)
		kvs, err := mg.GetMany(ctx, keys)
		cancel()
		for _, p := range batch {
			if err != nil {
				p.done <- getResult{err: err}
				continue
			}
			p.done <- getResult{kvs: kvs[:len(p.keys):len(p.keys)]}
			kvs = kvs[len(p.keys):]
		}
	}
}
