package streams

import (
	"errors"
	"fmt"

	"github.com/cockroachdb/pebble"
)

// ErrNotLocal is returned by Query when the key's task runs elsewhere (or
// nowhere yet).
var ErrNotLocal = errors.New("streams: the key's task is not open on this instance")

// Query reads k from the committed state of the key-value store named
// store, when this instance runs the key's task; otherwise it returns
// ErrNotLocal. The task is found from the key's bytes with Kafka's default
// partitioner, as for repartitioned keys and keyed producers. Routing a
// query to the instance that owns the key is not done yet.
func Query[K, V any](a *App, store string, ks Serde[K], vs Serde[V], k K) (V, bool, error) {
	var zero V
	spec := a.topo.stores[store]
	if spec == nil {
		return zero, false, fmt.Errorf("streams: no store %q", store)
	}
	kb, err := ks.Encode(k)
	if err != nil {
		return zero, false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.partitions[spec.origin]
	if n == 0 {
		return zero, false, ErrNotLocal
	}
	t := a.tasks[taskID{Topic: spec.origin.resolve(a.cfg.appID), Partition: KeyPartition(kb, int(n))}]
	if t == nil {
		return zero, false, ErrNotLocal
	}
	b, closer, err := t.db.Get(t.store(store).dbKey(kb))
	if errors.Is(err, pebble.ErrNotFound) {
		return zero, false, nil
	}
	if err != nil {
		return zero, false, err
	}
	defer closer.Close()
	v, err := vs.Decode(b)
	return v, err == nil, err
}
