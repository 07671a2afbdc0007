package streams

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

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

// forwardedHeader marks a query one instance forwarded to another, which
// answers it or fails but never forwards it again.
const forwardedHeader = "Streams-Forwarded"

// ownerEndpoint is the query endpoint of the instance running k's task in
// store's task group ("" when unknown).
func (a *App) ownerEndpoint(store string, kb []byte) string {
	spec := a.topo.stores[store]
	a.mu.Lock()
	n := a.partitions[spec.origin]
	a.mu.Unlock()
	if n == 0 {
		return ""
	}
	return a.bal.owner(spec.origin.resolve(a.cfg.appID), KeyPartition(kb, int(n)))
}

// QueryHandler serves GET ?key=<key> on the key-value store named store:
// 200 with the value as JSON, 404 when the key is absent, 503 when the
// key's task is not open anywhere known. A key whose task runs on another
// instance is forwarded to that instance's QueryEndpoint. parse turns the
// query parameter into a key.
func QueryHandler[K, V any](a *App, store string, ks Serde[K], vs Serde[V], parse func(string) (K, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k, err := parse(r.URL.Query().Get("key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		v, ok, err := Query(a, store, ks, vs, k)
		switch {
		case errors.Is(err, ErrNotLocal):
			kb, err := ks.Encode(k)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			a.forwardQuery(w, r, kb, store)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		case !ok:
			http.Error(w, "no such key", http.StatusNotFound)
		default:
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(v)
		}
	})
}

func (a *App) forwardQuery(w http.ResponseWriter, r *http.Request, kb []byte, store string) {
	owner := a.ownerEndpoint(store, kb)
	if owner == "" || owner == a.cfg.endpoint || r.Header.Get(forwardedHeader) != "" {
		http.Error(w, "the key's task is not open on any known instance", http.StatusServiceUnavailable)
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "http://"+owner+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	req.Header.Set(forwardedHeader, a.cfg.endpoint)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		http.Error(w, fmt.Sprintf("forwarding to %s: %v", owner, err), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
	w.WriteHeader(resp.StatusCode)
	io.Copy(w, resp.Body)
}
