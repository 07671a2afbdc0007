package streams

import (
	"fmt"
	"sync"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// collector takes the records a task writes. partition < 0 lets the
// producer's partitioner choose from the key.
type collector interface {
	send(topic string, partition int32, key, value []byte, ts time.Time, hdrs []kgo.RecordHeader, promise func(*kgo.Record, error))
}

// taskID names a task: one partition of a task group, named by the
// group's representative topic.
type taskID struct {
	Topic     string
	Partition int32
}

func (id taskID) String() string { return fmt.Sprintf("%s-%d", id.Topic, id.Partition) }

// task runs the records of one source partition through the topology and
// owns the stores they reach.
type task struct {
	id     taskID
	app    string
	srcs   map[string]*source // by resolved topic name
	db     *pebble.DB
	stores map[string]*kvStore
	out    collector
	m      *metrics
	// processed caches the per-topic counters: a label lookup per record
	// hashes the label values, 5% of the processing loop's CPU.
	processed map[string]prometheus.Counter

	mu      sync.Mutex       // guards next and sendErr, set by produce promises
	next    map[string]int64 // store -> changelog offset after its last record this commit
	sendErr error
}

func newTask(id taskID, app string, srcs map[string]*source, db *pebble.DB, stores []string, out collector, m *metrics) *task {
	t := &task{id: id, app: app, srcs: srcs, db: db, stores: map[string]*kvStore{}, out: out, m: m, next: map[string]int64{}}
	for _, s := range stores {
		t.stores[s] = newKVStore(db, s)
	}
	return t
}

func changelogTopic(app, store string) string { return app + "-" + store + "-changelog" }

func (t *task) store(name string) *kvStore {
	s := t.stores[name]
	if s == nil {
		// Build checks every store belongs to exactly one source, so a
		// miss here is a bug in this package.
		panic(fmt.Sprintf("streams: task %s has no store %q", t.id, name))
	}
	return s
}

func (t *task) send(ref topicRef, key, value []byte, ts time.Time, hdrs []kgo.RecordHeader) {
	t.out.send(ref.resolve(t.app), -1, key, value, ts, hdrs, t.promise(""))
}

func (t *task) promise(store string) func(*kgo.Record, error) {
	return func(r *kgo.Record, err error) {
		t.mu.Lock()
		defer t.mu.Unlock()
		if err != nil {
			if t.sendErr == nil {
				t.sendErr = fmt.Errorf("task %s: producing to %s: %w", t.id, r.Topic, err)
			}
			return
		}
		if store != "" && r.Offset+1 > t.next[store] {
			t.next[store] = r.Offset + 1
		}
	}
}

func (t *task) process(kr *kgo.Record) error {
	began := time.Now()
	c := &Context{Topic: kr.Topic, Partition: kr.Partition, Offset: kr.Offset, task: t}
	src := t.srcs[kr.Topic]
	if src == nil {
		return fmt.Errorf("task %s: record from %s, which is not one of its topics", t.id, kr.Topic)
	}
	if err := src.handle(c, kr); err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	n := t.processed[kr.Topic]
	if n == nil {
		if t.processed == nil {
			t.processed = map[string]prometheus.Counter{}
		}
		n = t.m.processed.WithLabelValues(kr.Topic)
		t.processed[kr.Topic] = n
	}
	n.Inc()
	t.m.latency.Observe(time.Since(began).Seconds())
	return nil
}

// flush writes the overlays' changelog records; the commit that follows
// publishes them with the outputs.
func (t *task) flush(now time.Time) {
	for _, name := range sortedKeys(t.stores) {
		s := t.stores[name]
		topic := changelogTopic(t.app, name)
		for _, k := range s.dirtyKeys() {
			var v []byte
			if p := s.dirty[k]; p != nil {
				v = *p
			}
			t.out.send(topic, t.id.Partition, []byte(k), v, now, nil, t.promise(name))
		}
	}
}

// err returns the first produce error since the last commit or abort.
func (t *task) err() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.sendErr
}

// commit writes the overlays and checkpoints to Pebble once the records
// flush sent are committed.
func (t *task) commit() error {
	t.mu.Lock()
	next := t.next
	t.next, t.sendErr = map[string]int64{}, nil
	t.mu.Unlock()
	b := t.db.NewBatch()
	for name, s := range t.stores {
		n, ok := next[name]
		if !ok {
			n = -1
		}
		if err := s.apply(b, n); err != nil {
			b.Close()
			return fmt.Errorf("task %s: %w", t.id, err)
		}
	}
	if err := b.Commit(pebble.NoSync); err != nil {
		return fmt.Errorf("task %s: %w", t.id, err)
	}
	t.m.storeBytes.WithLabelValues(t.id.String()).Set(float64(t.db.Metrics().DiskSpaceUsage()))
	return nil
}

// abort drops this interval's writes: the transaction that carried their
// changelog records did not commit.
func (t *task) abort() {
	t.mu.Lock()
	t.next, t.sendErr = map[string]int64{}, nil
	t.mu.Unlock()
	for _, s := range t.stores {
		s.discard()
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	return keys
}
