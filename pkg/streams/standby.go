package streams

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// standbys keeps warm copies of the stores of tasks this instance does not
// run (NumStandbyReplicas): each standby task's database is open and fed by
// tailing its changelog partitions with read_committed, with the
// checkpoint advanced as records are applied. When the task is assigned
// here, release closes the database and the restore that follows reads
// only what the standby had not applied yet.
//
// standbys.mu is never held together with App.mu or
// copartitionBalancer.mu (see doc.go).
type standbys struct {
	a *App

	mu     sync.Mutex
	cl     *kgo.Client // direct consumer of changelog partitions; nil until the first standby
	cancel context.CancelFunc
	done   chan struct{}
	tasks  map[taskID]*standbyTask
	parts  map[string]map[int32]*standbyStore // changelog topic -> partition -> store
}

type standbyTask struct {
	id     taskID
	db     *pebble.DB
	stores []*standbyStore
}

type standbyStore struct {
	t     *standbyTask
	kv    *kvStore
	topic string
	next  int64 // the next changelog offset to apply
	gauge prometheus.Gauge
}

func newStandbys(a *App) *standbys {
	return &standbys{a: a, tasks: map[taskID]*standbyTask{}, parts: map[string]map[int32]*standbyStore{}}
}

// held lists the standby tasks this instance holds, by task group, for its
// group metadata.
func (s *standbys) held() map[string][]int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tasks) == 0 {
		return nil
	}
	out := map[string][]int32{}
	for id := range s.tasks {
		out[id.Topic] = append(out[id.Topic], id.Partition)
	}
	return out
}

// reconcile opens the standby tasks the last assignment gave this instance
// and closes the others. Tasks this instance runs are never standbys.
func (s *standbys) reconcile() {
	want := map[taskID]bool{}
	for g, ps := range s.a.bal.standbyTasks() {
		for _, p := range ps {
			want[taskID{Topic: g, Partition: p}] = true
		}
	}
	active := s.a.activeOrOpening()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range sortedIDs(s.tasks) {
		if !want[id] || active[id] {
			s.closeLocked(id)
		}
	}
	for _, id := range sortedIDs(want) {
		if active[id] || s.tasks[id] != nil {
			continue
		}
		if err := s.openLocked(id); err != nil {
			s.a.m.standbyErrs.WithLabelValues("open").Inc()
			s.a.log.Warn("opening a standby task", "task", id.String(), "err", err)
		}
	}
	s.a.m.tasks.WithLabelValues("standby").Set(float64(len(s.tasks)))
}

// release closes the standby of task id, if any, so that the task can be
// opened as active.
func (s *standbys) release(id taskID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closeLocked(id)
	s.a.m.tasks.WithLabelValues("standby").Set(float64(len(s.tasks)))
}

func (s *standbys) openLocked(id taskID) error {
	rep, ok := s.a.reps[id.Topic]
	if !ok {
		return fmt.Errorf("no task group %s", id.Topic)
	}
	names := s.a.topo.storesOf(rep)
	if len(names) == 0 {
		return nil // a stateless task has nothing to keep warm
	}
	db, err := pebble.Open(s.a.taskDir(id), storeOptions())
	if err != nil {
		return err
	}
	t := &standbyTask{id: id, db: db}
	from := map[string]map[int32]kgo.Offset{}
	for _, name := range names {
		kv := newKVStore(db, name)
		next, err := kv.checkpoint()
		if err != nil {
			db.Close()
			return err
		}
		st := &standbyStore{t: t, kv: kv, topic: changelogTopic(s.a.cfg.appID, name), next: next,
			gauge: s.a.m.standbyNext.WithLabelValues(name, id.String())}
		st.gauge.Set(float64(next))
		t.stores = append(t.stores, st)
		from[st.topic] = map[int32]kgo.Offset{id.Partition: kgo.NewOffset().At(next)}
	}
	if s.cl == nil {
		cl, err := kgo.NewClient(s.a.clientOpts(
			kgo.ConsumePartitions(from),
			kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.KeepControlRecords(),
		)...)
		if err != nil {
			db.Close()
			return err
		}
		ctx, cancel := context.WithCancel(context.Background())
		s.cl, s.cancel, s.done = cl, cancel, make(chan struct{})
		go s.run(ctx, cl)
	} else {
		s.cl.AddConsumePartitions(from)
	}
	for _, st := range t.stores {
		if s.parts[st.topic] == nil {
			s.parts[st.topic] = map[int32]*standbyStore{}
		}
		s.parts[st.topic][id.Partition] = st
	}
	s.tasks[id] = t
	s.a.log.Info("standby task opened", "task", id.String())
	return nil
}

func (s *standbys) closeLocked(id taskID) {
	t := s.tasks[id]
	if t == nil {
		return
	}
	rm := map[string][]int32{}
	for _, st := range t.stores {
		delete(s.parts[st.topic], id.Partition)
		s.a.m.standbyNext.DeleteLabelValues(st.kv.name, id.String())
		rm[st.topic] = []int32{id.Partition}
	}
	if s.cl != nil {
		s.cl.RemoveConsumePartitions(rm)
	}
	if err := t.db.LogData(nil, pebble.Sync); err != nil {
		s.a.log.Warn("syncing a standby store", "task", id.String(), "err", err)
	}
	if err := t.db.Close(); err != nil {
		s.a.log.Warn("closing a standby store", "task", id.String(), "err", err)
	}
	delete(s.tasks, id)
	s.a.log.Info("standby task closed", "task", id.String())
}

// run applies changelog records to standby stores until ctx is done.
func (s *standbys) run(ctx context.Context, cl *kgo.Client) {
	defer close(s.done)
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		s.applyFetches(fs)
	}
}

// applyFetches applies a poll's records to the standby stores they are
// for, and counts fetch and apply errors. A failed apply closes the
// standby task: the fetch goes on past the records it failed to write, so
// applying later ones would leave a gap under a checkpoint past it. The
// database keeps its last good checkpoint, the instance stops offering
// the task as a standby, and the next rebalance can open it again.
func (s *standbys) applyFetches(fs kgo.Fetches) {
	for _, fe := range fs.Errors() {
		if !errors.Is(fe.Err, context.Canceled) {
			s.a.m.standbyErrs.WithLabelValues("fetch").Inc()
			s.a.log.Warn("standby fetch error", "topic", fe.Topic, "partition", fe.Partition, "err", fe.Err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		st := s.parts[p.Topic][p.Partition]
		if st == nil || len(p.Records) == 0 {
			return // closed since the fetch
		}
		if err := st.apply(p.Records); err != nil {
			s.a.m.standbyErrs.WithLabelValues("apply").Inc()
			s.a.log.Warn("applying to a standby store; closing the standby task", "task", st.t.id.String(), "store", st.kv.name, "err", err)
			s.closeLocked(st.t.id)
			s.a.m.tasks.WithLabelValues("standby").Set(float64(len(s.tasks)))
		}
	})
}

// apply writes committed changelog records (and the checkpoint past them)
// to the store, skipping offsets already applied.
func (st *standbyStore) apply(rs []*kgo.Record) error {
	b := st.t.db.NewBatch()
	next := st.next
	for _, r := range rs {
		if r.Offset < next {
			continue
		}
		next = r.Offset + 1
		if r.Attrs.IsControl() {
			continue
		}
		var err error
		if r.Value == nil {
			err = b.Delete(st.kv.dbKey(r.Key), nil)
		} else {
			err = b.Set(st.kv.dbKey(r.Key), r.Value, nil)
		}
		if err != nil {
			b.Close()
			return err
		}
	}
	if next == st.next {
		b.Close()
		return nil
	}
	if err := b.Set(checkpointKey(st.kv.name), u64(next), nil); err != nil {
		b.Close()
		return err
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return err
	}
	st.next = next
	st.gauge.Set(float64(next))
	return nil
}

// close closes every standby task and the changelog reader.
func (s *standbys) close() {
	s.mu.Lock()
	for _, id := range sortedIDs(s.tasks) {
		s.closeLocked(id)
	}
	cl, cancel, done := s.cl, s.cancel, s.done
	s.cl = nil
	s.mu.Unlock()
	if cl != nil {
		cancel()
		<-done
		cl.Close()
	}
}
