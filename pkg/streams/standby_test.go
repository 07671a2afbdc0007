package streams

import (
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/cockroachdb/pebble"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestStandbyApplyErrors applies changelog records to a standby store,
// then fails an apply (the database reopened read-only) and a fetch: both
// are counted in streams_standby_errors_total, the failing standby task
// is closed, and its checkpoint stays at the last applied offset.
func TestStandbyApplyErrors(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry(), "app")
	if err != nil {
		t.Fatal(err)
	}
	a := &App{m: m, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := newStandbys(a)
	dir := t.TempDir()
	id := taskID{Topic: "in", Partition: 0}
	topic := changelogTopic("app", "st")
	open := func(opts *pebble.Options) *standbyStore {
		t.Helper()
		db, err := pebble.Open(dir, opts)
		if err != nil {
			t.Fatal(err)
		}
		kv := newKVStore(db, "st")
		next, err := kv.checkpoint()
		if err != nil {
			t.Fatal(err)
		}
		task := &standbyTask{id: id, db: db}
		st := &standbyStore{t: task, kv: kv, topic: topic, next: next, gauge: m.standbyNext.WithLabelValues("st", id.String())}
		task.stores = []*standbyStore{st}
		s.tasks[id] = task
		s.parts[topic] = map[int32]*standbyStore{0: st}
		return st
	}
	fetch := func(p kgo.FetchPartition) kgo.Fetches {
		return kgo.Fetches{{Topics: []kgo.FetchTopic{{Topic: topic, Partitions: []kgo.FetchPartition{p}}}}}
	}
	rec := func(off int64, k, v string) *kgo.Record {
		r := &kgo.Record{Topic: topic, Offset: off, Key: []byte(k)}
		if v != "" {
			r.Value = []byte(v)
		}
		return r
	}
	errs := func(op string) float64 { return counterValue(m.standbyErrs.WithLabelValues(op)) }

	st := open(storeOptions())
	s.applyFetches(fetch(kgo.FetchPartition{Records: []*kgo.Record{rec(0, "a", "1"), rec(1, "b", "2"), rec(4, "a", "")}}))
	if st.next != 5 || errs("apply") != 0 {
		t.Fatalf("next %d, apply errors %v; want 5, 0", st.next, errs("apply"))
	}
	if v, ok, _ := st.kv.get([]byte("b")); !ok || string(v) != "2" {
		t.Fatalf("b = %q %v", v, ok)
	}
	if _, ok, _ := st.kv.get([]byte("a")); ok {
		t.Fatal("a was deleted at offset 4")
	}
	// Already applied offsets are skipped.
	s.applyFetches(fetch(kgo.FetchPartition{Records: []*kgo.Record{rec(1, "b", "old")}}))
	if v, _, _ := st.kv.get([]byte("b")); string(v) != "2" {
		t.Fatalf("b = %q after a replayed offset", v)
	}
	if err := st.t.db.Close(); err != nil {
		t.Fatal(err)
	}

	ro := storeOptions()
	ro.ReadOnly = true
	st = open(ro)
	if st.next != 5 {
		t.Fatalf("checkpoint %d, want 5", st.next)
	}
	s.applyFetches(fetch(kgo.FetchPartition{Records: []*kgo.Record{rec(5, "c", "3")}}))
	if errs("apply") != 1 {
		t.Fatalf("apply errors %v, want 1", errs("apply"))
	}
	if len(s.tasks) != 0 || s.parts[topic][0] != nil {
		t.Fatalf("the failing standby task is still open: %v", s.tasks)
	}
	s.applyFetches(fetch(kgo.FetchPartition{Partition: 1, Err: errors.New("broker gone")}))
	if errs("fetch") != 1 {
		t.Fatalf("fetch errors %v, want 1", errs("fetch"))
	}

	st = open(storeOptions())
	defer st.t.db.Close()
	if st.next != 5 {
		t.Fatalf("checkpoint %d after the failed apply, want 5", st.next)
	}
	if _, ok, _ := st.kv.get([]byte("c")); ok {
		t.Fatal("c written by the failed apply")
	}
}
