package streams

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// globalState is an App's global tables: one Pebble database,
// "<state dir>/<app>/global", holding every global store (keys as in a
// task's database) and, per partition of each global topic, the next
// offset to read:
//
//	'o' topic 0x00 partition(4)   next offset (8 bytes big-endian)
//
// One reader goroutine writes it; tasks read it concurrently (Pebble is
// safe for that).
type globalState struct {
	db      *pebble.DB
	stores  map[string]*kvStore // by store name
	byTopic map[string]*kvStore
	cancel  context.CancelFunc
	done    chan struct{}

	mu     sync.RWMutex // held to read, and to close db
	closed bool
}

// get reads k from store unless the state is closed.
func (gs *globalState) get(store string, k []byte) ([]byte, bool, error) {
	gs.mu.RLock()
	defer gs.mu.RUnlock()
	if gs.closed {
		return nil, false, ErrNotStarted
	}
	return gs.stores[store].get(k)
}

const globalOffsetTag = 'o'

// globalsRef holds an App's global state once bootstrapped; queries read
// it from other goroutines.
type globalsRef struct{ atomic.Pointer[globalState] }

func globalOffsetKey(topic string, p int32) []byte {
	k := append([]byte{globalOffsetTag}, topic...)
	return binary.BigEndian.AppendUint32(append(k, 0), uint32(p))
}

// globalGet reads k from a global store (the TestDriver has its own).
func (a *App) globalGet(store string, k []byte) ([]byte, bool, error) {
	gs := a.globals.Load()
	if gs == nil || gs.stores[store] == nil {
		return nil, false, fmt.Errorf("streams: no global store %q", store)
	}
	return gs.get(store, k)
}

// ErrNotStarted is returned by QueryGlobal before the App's global tables
// have bootstrapped, and after Run returned.
var ErrNotStarted = errors.New("streams: the global tables are not bootstrapped yet")

// QueryGlobal reads k from the global store named store, as this instance
// holds it now (every instance holds all of it).
func QueryGlobal[K, V any](a *App, store string, ks Serde[K], vs Serde[V], k K) (V, bool, error) {
	var zero V
	if a.topo.globals[store] == nil {
		return zero, false, fmt.Errorf("streams: no global store %q", store)
	}
	gs := a.globals.Load()
	if gs == nil {
		return zero, false, ErrNotStarted
	}
	kb, err := ks.Encode(k)
	if err != nil {
		return zero, false, err
	}
	b, ok, err := gs.get(store, kb)
	if err != nil || !ok {
		return zero, false, err
	}
	v, err := vs.Decode(b)
	return v, err == nil, err
}

// startGlobals reads every global topic up to its last stable offset
// (bootstrapping: no task processes a record before), then keeps reading
// on a goroutine until the returned stop is called.
func (a *App) startGlobals(ctx context.Context) (stop func(), err error) {
	if len(a.topo.globals) == 0 {
		return func() {}, nil
	}
	db, err := pebble.Open(filepath.Join(a.cfg.stateDir, a.cfg.appID, "global"), storeOptions())
	if err != nil {
		return nil, fmt.Errorf("streams: opening the global store: %w", err)
	}
	gs := &globalState{db: db, stores: map[string]*kvStore{}, byTopic: map[string]*kvStore{}, done: make(chan struct{})}
	for _, g := range a.topo.globals {
		s := newKVStore(db, g.store)
		gs.stores[g.store], gs.byTopic[g.topic] = s, s
	}
	rc, next, ends, err := a.globalReader(ctx, gs)
	if err != nil {
		db.Close()
		return nil, err
	}
	began := time.Now()
	for !globalCaughtUp(next, ends) {
		fs := rc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			rc.Close()
			db.Close()
			return nil, err
		}
		if err := gs.apply(fs, next); err != nil {
			rc.Close()
			db.Close()
			return nil, err
		}
	}
	a.log.Info("global tables bootstrapped", "took", time.Since(began))
	a.globals.Store(gs)
	gctx, cancel := context.WithCancel(ctx)
	gs.cancel = cancel
	go func() {
		defer close(gs.done)
		for gctx.Err() == nil {
			fs := rc.PollFetches(gctx)
			if gctx.Err() != nil {
				return
			}
			if err := gs.apply(fs, next); err != nil {
				a.log.Warn("global table reader", "err", err)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			a.globals.Store(nil)
			cancel()
			<-gs.done
			rc.Close()
			gs.mu.Lock()
			gs.closed = true
			err := db.Close()
			gs.mu.Unlock()
			if err != nil {
				a.log.Warn("closing the global store", "err", err)
			}
		})
	}, nil
}

// globalReader returns a client reading every partition of the global
// topics from its checkpoint, with where each partition stands and where
// bootstrapping ends.
func (a *App) globalReader(ctx context.Context, gs *globalState) (*kgo.Client, map[string]map[int32]int64, map[string]map[int32]int64, error) {
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("streams: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	consume := map[string]map[int32]kgo.Offset{}
	next := map[string]map[int32]int64{}
	ends := map[string]map[int32]int64{}
	for topic := range gs.byTopic {
		end, err := adm.ListCommittedOffsets(ctx, topic)
		if err == nil {
			err = end.Error()
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("streams: global topic %s: %w", topic, err)
		}
		start, err := adm.ListStartOffsets(ctx, topic)
		if err == nil {
			err = start.Error()
		}
		if err != nil {
			return nil, nil, nil, fmt.Errorf("streams: global topic %s: %w", topic, err)
		}
		if len(end[topic]) == 0 {
			return nil, nil, nil, fmt.Errorf("streams: global topic %s does not exist", topic)
		}
		consume[topic], next[topic], ends[topic] = map[int32]kgo.Offset{}, map[int32]int64{}, map[int32]int64{}
		for p, o := range end[topic] {
			from := int64(0)
			if v, closer, err := gs.db.Get(globalOffsetKey(topic, p)); err == nil {
				from = int64(binary.BigEndian.Uint64(v))
				closer.Close()
			} else if !errors.Is(err, pebble.ErrNotFound) {
				return nil, nil, nil, err
			}
			if s, ok := start.Lookup(topic, p); ok {
				from = max(from, s.Offset)
			}
			consume[topic][p] = kgo.NewOffset().At(from)
			next[topic][p], ends[topic][p] = from, o.Offset
		}
	}
	rc, err := kgo.NewClient(a.clientOpts(
		kgo.ConsumePartitions(consume),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("streams: %w", err)
	}
	return rc, next, ends, nil
}

func globalCaughtUp(next, ends map[string]map[int32]int64) bool {
	for topic, ps := range ends {
		for p, end := range ps {
			if next[topic][p] < end {
				return false
			}
		}
	}
	return true
}

// apply writes polled records and the new offsets in one batch.
func (gs *globalState) apply(fs kgo.Fetches, next map[string]map[int32]int64) error {
	var ferr error
	fs.EachError(func(topic string, p int32, err error) {
		if ferr == nil && !errors.Is(err, context.Canceled) {
			ferr = fmt.Errorf("streams: reading global topic %s/%d: %w", topic, p, err)
		}
	})
	if ferr != nil {
		return ferr
	}
	b := gs.db.NewBatch()
	defer b.Close()
	var err error
	fs.EachRecord(func(r *kgo.Record) {
		if err != nil {
			return
		}
		next[r.Topic][r.Partition] = r.Offset + 1
		if err = b.Set(globalOffsetKey(r.Topic, r.Partition), u64(r.Offset+1), nil); err != nil || r.Attrs.IsControl() {
			return
		}
		s := gs.byTopic[r.Topic]
		if r.Value == nil {
			err = b.Delete(s.dbKey(r.Key), nil)
		} else {
			err = b.Set(s.dbKey(r.Key), r.Value, nil)
		}
	})
	if err != nil {
		return fmt.Errorf("streams: global store: %w", err)
	}
	return b.Commit(pebble.NoSync)
}
