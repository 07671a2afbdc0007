package streams

import (
	"fmt"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestDriver runs a topology in memory, without a broker, like Kafka
// Streams' TopologyTestDriver: every topic has one partition, records are
// processed one at a time as they are piped in, repartition records are
// processed at once, and state is committed after each piped record.
// Stores are Pebble databases on an in-memory filesystem, so the code under
// test is the code that runs against a broker.
type TestDriver struct {
	topo    *Topology
	app     string
	tasks   map[taskID]*task
	dbs     []*pebble.DB
	m       *metrics
	queue   []*kgo.Record
	offsets map[string]int64
	topics  map[string][]*kgo.Record // everything written, per topic
	read    map[string]int           // how much of topics Output has returned
	globals *globalState             // global tables, opened on first use (driver_global.go)
}

// TestDriverApplicationID is the application id a TestDriver runs under:
// internal topics are named "test-<name>-repartition" and
// "test-<store>-changelog".
const TestDriverApplicationID = "test"

// NewTestDriver returns a driver for topo.
func NewTestDriver(topo *Topology) (*TestDriver, error) {
	m, err := newMetrics(prometheus.NewRegistry(), TestDriverApplicationID)
	if err != nil {
		return nil, err
	}
	return &TestDriver{
		topo: topo, app: TestDriverApplicationID, tasks: map[taskID]*task{}, m: m,
		offsets: map[string]int64{}, topics: map[string][]*kgo.Record{}, read: map[string]int{},
	}, nil
}

// Close releases the driver's stores.
func (d *TestDriver) Close() error {
	var first error
	for _, db := range d.dbs {
		if err := db.Close(); err != nil && first == nil {
			first = err
		}
	}
	d.dbs = nil
	return first
}

func (d *TestDriver) send(topic string, _ int32, key, value []byte, ts time.Time, hdrs []kgo.RecordHeader, promise func(*kgo.Record, error)) {
	r := &kgo.Record{Topic: topic, Key: key, Value: value, Timestamp: ts, Headers: hdrs, Offset: d.offsets[topic]}
	d.offsets[topic]++
	d.topics[topic] = append(d.topics[topic], r)
	if d.topo.sourceFor(d.app, topic) != nil || d.topo.globalFor(topic) != nil {
		d.queue = append(d.queue, r)
	}
	promise(r, nil)
}

func (d *TestDriver) task(topic string) (*task, error) {
	rep, srcs, ok := d.topo.taskSources(d.app, topic)
	if !ok {
		return nil, fmt.Errorf("streams: the topology does not read %q", topic)
	}
	id := taskID{Topic: rep.resolve(d.app)}
	if t := d.tasks[id]; t != nil {
		return t, nil
	}
	opts := storeOptions()
	opts.FS = vfs.NewMem()
	db, err := pebble.Open("", opts)
	if err != nil {
		return nil, err
	}
	d.dbs = append(d.dbs, db)
	t := newTask(id, d.app, srcs, db, d.topo.storesOf(rep), d, d.m)
	d.tasks[id] = t
	return t, nil
}

// pipe processes one record and everything it sends to repartition
// topics, then commits.
func (d *TestDriver) pipe(r *kgo.Record) error {
	d.queue = append(d.queue, r)
	for len(d.queue) > 0 {
		r := d.queue[0]
		d.queue = d.queue[1:]
		if done, err := d.applyGlobal(r); done || err != nil {
			if err != nil {
				return err
			}
			continue
		}
		t, err := d.task(r.Topic)
		if err != nil {
			return err
		}
		if err := t.process(r); err != nil {
			return err
		}
	}
	for _, id := range sortedTaskIDs(d.tasks) {
		t := d.tasks[id]
		t.flush(time.UnixMilli(0))
		if err := t.commit(); err != nil {
			return err
		}
	}
	return nil
}

// Pipe feeds one record to topic.
func Pipe[K, V any](d *TestDriver, topic string, ks Serde[K], vs Serde[V], k K, v V, ts time.Time) error {
	kb, err := ks.Encode(k)
	if err != nil {
		return err
	}
	vb, err := vs.Encode(v)
	if err != nil {
		return err
	}
	r := &kgo.Record{Topic: topic, Key: kb, Value: vb, Timestamp: ts, Offset: d.offsets[topic]}
	d.offsets[topic]++
	return d.pipe(r)
}

// Output returns the records written to topic since the last Output call
// for it, decoded. Internal topics are named with TestDriverApplicationID.
func Output[K, V any](d *TestDriver, topic string, ks Serde[K], vs Serde[V]) ([]Record[K, V], error) {
	all := d.topics[topic]
	from := d.read[topic]
	d.read[topic] = len(all)
	var out []Record[K, V]
	for _, r := range all[from:] {
		k, err := ks.Decode(r.Key)
		if err != nil {
			return nil, err
		}
		v, err := vs.Decode(r.Value)
		if err != nil {
			return nil, err
		}
		out = append(out, Record[K, V]{Key: k, Value: v, Timestamp: r.Timestamp, Headers: r.Headers})
	}
	return out, nil
}

// DroppedLate is how many records store dropped for arriving after their
// window closed.
func (d *TestDriver) DroppedLate(store string) int64 {
	return int64(counterValue(d.m.lateDropped.WithLabelValues(store)))
}

func sortedTaskIDs(m map[taskID]*task) []taskID {
	ids := make([]taskID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	for i := 1; i < len(ids); i++ {
		for j := i; j > 0 && (ids[j].Topic < ids[j-1].Topic || ids[j].Topic == ids[j-1].Topic && ids[j].Partition < ids[j-1].Partition); j-- {
			ids[j], ids[j-1] = ids[j-1], ids[j]
		}
	}
	return ids
}

// PipeDelete feeds a tombstone (a null value) for k to topic.
func PipeDelete[K any](d *TestDriver, topic string, ks Serde[K], k K, ts time.Time) error {
	kb, err := ks.Encode(k)
	if err != nil {
		return err
	}
	r := &kgo.Record{Topic: topic, Key: kb, Timestamp: ts, Offset: d.offsets[topic]}
	d.offsets[topic]++
	return d.pipe(r)
}

// Get reads k from the committed state of the key-value store named store.
func Get[K, V any](d *TestDriver, store string, ks Serde[K], vs Serde[V], k K) (V, bool, error) {
	var zero V
	spec := d.topo.stores[store]
	if spec == nil {
		return zero, false, fmt.Errorf("streams: no store %q", store)
	}
	t := d.tasks[taskID{Topic: spec.origin.resolve(d.app)}]
	if t == nil {
		return zero, false, nil // no record has reached the store yet
	}
	kb, err := ks.Encode(k)
	if err != nil {
		return zero, false, err
	}
	b, ok, err := t.store(store).get(kb)
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := vs.Decode(b)
	return v, err == nil, err
}
