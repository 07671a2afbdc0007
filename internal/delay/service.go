package delay

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// ErrNotOwned: the store partition for a target is not run by this broker.
var ErrNotOwned = errors.New("delay: the delay store partition is not led here")

// Service holds delayed records and delivers them when due.
type Service struct {
	cfg   Config
	e     *log.Engine
	store *log.InternalTopic
	log   *slog.Logger
	m     *metrics
	// remote reaches partitions led by other brokers (cluster mode; nil
	// on a single node).
	remote *Remote
	// txns adds store partitions to transactions (nil: transactional
	// batches with delayed records are refused).
	txns TxnJoiner
	// cz compresses store batches with their producer's codec.
	cz *compressors
	// hp keeps held slices for reuse by the next produce request.
	hp heldPool

	mu     sync.Mutex
	single bool  // a single node: this broker runs every store partition
	n      int32 // store partitions, 0 until the store exists
	parts  map[int32]*part
	ctx    context.Context
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// New makes the service over e. Start runs it.
func New(cfg Config, e *log.Engine, reg prometheus.Registerer, logger *slog.Logger) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	s := &Service{cfg: cfg, e: e, store: log.NewInternalTopic(e, Topic), log: logger, parts: map[int32]*part{},
		cz: newCompressors()}
	// Entries younger than StoreMinCompactionLag are left out of the
	// store's compaction, so that a burst of held records is not
	// rewritten while it arrives. Delivered entries and their tombstones
	// go once that old.
	if lag := cfg.StoreMinCompactionLag; lag > 0 {
		s.store.Configs = map[string]string{"min.compaction.lag.ms": strconv.FormatInt(lag.Milliseconds(), 10)}
	}
	s.m = newMetrics(reg, s.pending)
	s.ctx, s.stop = context.WithCancel(context.Background())
	return s, nil
}

func (s *Service) now() int64 { return s.cfg.Now().UnixMilli() }

// SetRemote gives the service its way to other brokers (cluster mode);
// call before Start.
func (s *Service) SetRemote(r *Remote) { s.remote = r }

// Start creates the store if needed and, on a single node, runs every
// store partition (owned ones: explicit is true in cluster mode, where
// OwnPartition starts each).
func (s *Service) Start(ctx context.Context, explicit bool) error {
	s.mu.Lock()
	s.single = !explicit
	s.mu.Unlock()
	if explicit {
		return nil // partitions start as this broker acquires them
	}
	// The store is created on first use, as Kafka's offsets topic; one
	// left by an earlier run is run at once.
	n, err := s.storeN(ctx, false)
	if errors.Is(err, ErrNotOwned) {
		return nil
	}
	if err != nil {
		return err
	}
	for i := range n {
		s.OwnPartition(i)
	}
	return nil
}

// storeN is the store's partition count, creating the store if asked.
func (s *Service) storeN(ctx context.Context, create bool) (int32, error) {
	s.mu.Lock()
	n := s.n
	s.mu.Unlock()
	if n > 0 {
		return n, nil
	}
	if t, ok := s.e.Topic(Topic); ok {
		n = t.Partitions
	} else if !create {
		return 0, fmt.Errorf("%w: %s does not exist", ErrNotOwned, Topic)
	} else {
		var err error
		if n, err = s.store.Create(ctx, s.cfg.Partitions); err != nil {
			return 0, fmt.Errorf("delay: creating %s: %w", Topic, err)
		}
	}
	s.mu.Lock()
	s.n = n
	s.mu.Unlock()
	return n, nil
}

// OwnPartition starts running store partition i (this broker leads it).
func (s *Service) OwnPartition(i int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.parts[i] != nil || s.ctx.Err() != nil {
		return
	}
	sp, err := s.e.Partition(Topic, i)
	if err != nil {
		s.log.Error("delay store partition missing", "partition", i, "err", err)
		return
	}
	ctx, cancel := context.WithCancel(s.ctx)
	p := newPart(s, i, sp, cancel)
	s.parts[i] = p
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		p.run(ctx)
	}()
}

// ReleasePartition stops running store partition i (leadership moved).
func (s *Service) ReleasePartition(i int32) {
	s.mu.Lock()
	p := s.parts[i]
	delete(s.parts, i)
	s.mu.Unlock()
	if p != nil {
		p.cancel()
		<-p.done
	}
}

// Close stops every worker.
func (s *Service) Close() {
	s.stop()
	s.wg.Wait()
}

func (s *Service) partFor(ctx context.Context, t Target) (*part, error) {
	n, err := s.storeN(ctx, true)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	single := s.single && len(s.parts) == 0
	s.mu.Unlock()
	if single {
		for i := range n {
			s.OwnPartition(i) // just created: a single node runs them all
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := StorePartition(t, n)
	if p := s.parts[i]; p != nil {
		return p, nil
	}
	return nil, fmt.Errorf("%w: %s-%d (for %s)", ErrNotOwned, Topic, i, t)
}

func (s *Service) owned() []*part {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*part, 0, len(s.parts))
	for _, p := range s.parts {
		out = append(out, p)
	}
	return out
}

func (s *Service) pending() float64 {
	n := int64(0)
	for _, p := range s.owned() {
		n += p.pendingCount()
	}
	return float64(n)
}

// Hold is the produce path's answer to log.ErrDelayed: it appends the
// payload to p with its delayed records taken out (see split) and appends
// those to the store partition of p. The result is the target append's
// (its base offset is what the produce response reports); wait waits for
// the store append too: written (durable false, acks=1) or durable (acks
// all). A refused payload keeps nothing.
func (s *Service) Hold(ctx context.Context, p *log.Partition, payload []byte) (log.AppendResult, func(ctx context.Context, durable bool) error, error) {
	return s.hold(ctx, p, payload, "")
}

// HoldTxn is Hold for a produce with transactional id txnID: the held
// records of a transactional batch are written in the transaction and
// become pending only if it commits (txn.go).
func (s *Service) HoldTxn(ctx context.Context, p *log.Partition, payload []byte, txnID string) (log.AppendResult, func(ctx context.Context, durable bool) error, error) {
	return s.hold(ctx, p, payload, txnID)
}

func (s *Service) hold(ctx context.Context, p *log.Partition, payload []byte, txnID string) (res log.AppendResult, wait func(ctx context.Context, durable bool) error, err error) {
	now := s.now()
	var a arena // the held records' entry values, until the store batch is made
	defer a.free()
	kept, hs, err := split(ctx, payload, now, s.cfg.MaxDelay, p.DecodeRecords, p.WalkRecords, &a, &s.hp)
	defer s.hp.put(hs) // hs is only cut shorter below, never grown
	if err != nil {
		var re *batch.RecordErrors
		if errors.As(err, &re) {
			return res, nil, fmt.Errorf("%w: %w", log.ErrInvalidRecord, err)
		}
		return res, nil, err
	}
	if kept == nil {
		res, err = p.AppendHeld(ctx, payload)
		return res, nil, err
	}
	pr := noProducer
	if batch.Attributes(payload)&batch.AttrTransactional != 0 && batch.ProducerID(payload) >= 0 {
		switch {
		case txnID == "":
			return res, nil, fmt.Errorf("%w: a transactional batch with headers %s or %s needs the produce request's transactional id",
				log.ErrInvalidRecord, HeaderDeliverAt, HeaderDelayMs)
		case s.txns == nil:
			return res, nil, fmt.Errorf("%w: headers %s and %s are not taken in a transactional batch here (no transaction coordinator)",
				log.ErrInvalidRecord, HeaderDeliverAt, HeaderDelayMs)
		}
		pr = storeProducer{id: batch.ProducerID(payload), epoch: batch.ProducerEpoch(payload)}
	}
	t := Target{Topic: p.Topic(), Partition: p.ID()}
	sp, err := s.partFor(ctx, t)
	if err != nil && (s.remote == nil || !errors.Is(err, ErrNotOwned)) {
		return res, nil, fmt.Errorf("%w: %w", log.ErrNotLeader, err)
	}
	if pr.id >= 0 {
		// The store partition joins the transaction before anything is
		// appended: its commit or abort marker decides the held records.
		s.mu.Lock()
		i := StorePartition(t, s.n)
		s.mu.Unlock()
		if err := s.txns.JoinTxn(ctx, txnID, pr.id, pr.epoch, Topic, i); err != nil {
			return res, nil, fmt.Errorf("delay: adding %s-%d to transaction %q: %w", Topic, i, txnID, err)
		}
	}
	res, err = p.AppendHeld(ctx, kept)
	if err != nil {
		return res, nil, err
	}
	// Each kept batch starts where the previous one's offsets end.
	var bases []int64
	for b, off := kept, res.BaseOffset; len(b) > 0; {
		size, _ := batch.Size(b)
		bases = append(bases, off)
		off += int64(int32(uint32(b[batch.OffLastOffsetDelta])<<24|uint32(b[batch.OffLastOffsetDelta+1])<<16|
			uint32(b[batch.OffLastOffsetDelta+2])<<8|uint32(b[batch.OffLastOffsetDelta+3]))) + 1
		b = b[size:]
	}
	if sp == nil {
		// The store partition is led by another broker: forwarded there,
		// acks=all, before the produce is answered.
		err := s.forward(ctx, t, now, hs, bases, pr)
		return res, nil, err
	}
	if res.Duplicate() {
		// A retry of a batch already appended: its held records are in
		// the store, unless the crash that made the producer retry came
		// before they were durable. Those pending or recently delivered
		// are not held again.
		select {
		case <-sp.ready:
		case <-sp.done:
			return res, nil, fmt.Errorf("%w: %w", log.ErrNotLeader, ErrNotOwned)
		case <-ctx.Done():
			return res, nil, ctx.Err()
		}
		hs = sp.unknown(t, hs, bases)
		if len(hs) == 0 {
			return res, nil, nil
		}
	}
	var sres log.AppendResult
	var last int64
	if pr.id >= 0 {
		sb := s.storeBatch(t, now, hs, bases, pr)
		sbases, _, lres, lastOff, err := sp.appendTxn(ctx, sb)
		if err != nil {
			return res, nil, err
		}
		for _, es := range sp.payloadEntries(ctx, sb, sbases) {
			sp.addTxn(t, pr.id, es) // one target: t
		}
		sres, last = lres, lastOff
	} else {
		// The append copies sb into the WAL: its buffer is reused.
		bp := storeBufPool.Get().(*[]byte)
		sb := appendHeldBatches((*bp)[:0], t, now, hs, bases, pr, s.cz)
		sres, err = sp.p.AppendHeld(ctx, sb)
		if cap(sb) <= maxPooledStoreBuf {
			*bp = sb[:0]
			storeBufPool.Put(bp)
		}
		if err != nil {
			return res, nil, fmt.Errorf("delay: appending to %s-%d: %w", Topic, sp.id, err)
		}
		sp.addHeld(t, hs, bases, sres.BaseOffset)
		s.m.held.Add(float64(len(hs)))
		last = sres.BaseOffset + int64(len(hs)) - 1
	}
	wait = func(ctx context.Context, durable bool) error {
		if durable {
			return sp.p.WaitDurable(ctx, sres, last)
		}
		return sres.WaitWritten(ctx)
	}
	return res, wait, nil
}

// storeBatch encodes held records as entries of the store, as producer pr.
func (s *Service) storeBatch(t Target, now int64, hs []held, bases []int64, pr storeProducer) []byte {
	return appendHeldBatches(nil, t, now, hs, bases, pr, s.cz)
}

// forward sends held records to the broker leading t's store partition.
func (s *Service) forward(ctx context.Context, t Target, now int64, hs []held, bases []int64, pr storeProducer) error {
	sb := s.storeBatch(t, now, hs, bases, pr)
	s.mu.Lock()
	i := StorePartition(t, s.n)
	s.mu.Unlock()
	// Leadership of a store partition moves with its broker: retried
	// briefly here, then the producer retries the whole batch.
	var err2 error
	for attempt := range 20 {
		if _, err2 = s.remote.produce(ctx, Topic, i, sb); err2 == nil || !retriable(err2) {
			break
		}
		if !sleep(ctx, time.Duration(50<<min(attempt, 4))*time.Millisecond) {
			break
		}
	}
	if err2 != nil {
		return fmt.Errorf("%w: delay: forwarding held records to %s-%d: %v", log.ErrNotLeader, Topic, i, err2)
	}
	return nil
}
