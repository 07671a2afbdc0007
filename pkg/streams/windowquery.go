package streams

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/cockroachdb/pebble"
)

// windowKind says how a store lays out its windows.
type windowKind int

const (
	notWindowed windowKind = iota
	timeWindowed
	slidingWindowed
	sessionWindowed
)

// windowSpec is a window store's layout and window size (ms; sessions
// have none).
type windowSpec struct {
	kind windowKind
	size int64
}

func (b *Builder) markWindowStore(store string, kind windowKind, size int64) {
	if st := b.stores[store]; st != nil {
		st.window = windowSpec{kind: kind, size: size}
	}
}

// WindowValue is one window of a key and its aggregate, as window queries
// return them.
type WindowValue[K, A any] struct {
	Window Windowed[K]
	Value  A
}

// QueryWindows reads the windows of k that start from from to to
// (inclusive) in the window or session store named store, from its
// committed state, oldest first, when this instance runs k's task;
// otherwise it returns ErrNotLocal. Time windows are kept until they close
// (end + grace); sliding windows a little longer; sessions until they
// close. To read every window of a key, give the zero time and a far one.
func QueryWindows[K, A any](a *App, store string, ks Serde[K], as Serde[A], k K, from, to time.Time) ([]WindowValue[K, A], error) {
	spec := a.topo.stores[store]
	if spec == nil || spec.window.kind == notWindowed {
		return nil, fmt.Errorf("streams: no window store %q", store)
	}
	kb, err := ks.Encode(k)
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	n := a.partitions[spec.origin]
	if n == 0 {
		return nil, ErrNotLocal
	}
	t := a.tasks[taskID{Topic: spec.origin.resolve(a.cfg.appID), Partition: KeyPartition(kb, int(n))}]
	if t == nil {
		return nil, ErrNotLocal
	}
	return fetchWindows(t.db, t.store(store), spec.window, ks, as, kb, from.UnixMilli(), to.UnixMilli())
}

// FetchWindows is QueryWindows on a TestDriver's committed state.
func FetchWindows[K, A any](d *TestDriver, store string, ks Serde[K], as Serde[A], k K, from, to time.Time) ([]WindowValue[K, A], error) {
	spec := d.topo.stores[store]
	if spec == nil || spec.window.kind == notWindowed {
		return nil, fmt.Errorf("streams: no window store %q", store)
	}
	t := d.tasks[taskID{Topic: spec.origin.resolve(d.app)}]
	if t == nil {
		return nil, nil
	}
	kb, err := ks.Encode(k)
	if err != nil {
		return nil, err
	}
	return fetchWindows(t.db, t.store(store), spec.window, ks, as, kb, from.UnixMilli(), to.UnixMilli())
}

// fetchWindows scans the committed windows of kb starting in [from, to].
func fetchWindows[K, A any](db *pebble.DB, st *kvStore, w windowSpec, ks Serde[K], as Serde[A], kb []byte, from, to int64) ([]WindowValue[K, A], error) {
	k, err := ks.Decode(kb)
	if err != nil {
		return nil, err
	}
	var out []WindowValue[K, A]
	add := func(start, end int64, vb []byte) error {
		v, err := as.Decode(vb)
		if err != nil {
			return err
		}
		out = append(out, WindowValue[K, A]{Window: Windowed[K]{Key: k, Start: time.UnixMilli(start), End: time.UnixMilli(end)}, Value: v})
		return nil
	}
	if to == math.MaxInt64 {
		to--
	}
	switch w.kind {
	case timeWindowed:
		err = committedScan(db, st, windowKey(from, nil), windowKey(to+1, nil), func(key, v []byte) error {
			if len(key) < 8 {
				return nil
			}
			start, wk := splitWindowKey(key)
			if !bytes.Equal(wk, kb) {
				return nil
			}
			return add(start, start+w.size, v)
		})
	case slidingWindowed:
		err = committedScan(db, st, slidingKey(kb, from), slidingKey(kb, to+1), func(key, v []byte) error {
			if len(v) < 8 {
				return errCorruptWindow(st.name)
			}
			start := int64(binary.BigEndian.Uint64(key[len(key)-8:]) ^ (1 << 63))
			return add(start, start+w.size, v[8:])
		})
	case sessionWindowed:
		// Ordered by end: a session starting by to ends at or after from.
		err = committedScan(db, st, sessionKey(from, math.MinInt64, nil), streamTimeKey, func(key, v []byte) error {
			if len(key) < 16 {
				return nil
			}
			end, start, sk := splitSessionKey(key)
			if !bytes.Equal(sk, kb) || start < from || start > to {
				return nil
			}
			return add(start, end, v)
		})
	}
	if err != nil {
		return nil, err
	}
	// Time and session stores are not ordered by the key's start.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].Window.Start.Before(out[j-1].Window.Start); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// committedScan calls fn for the committed keys of st in [lo, hi): what
// the last commit wrote to Pebble, not the open interval's overlay.
func committedScan(db *pebble.DB, st *kvStore, lo, hi []byte, fn func(k, v []byte) error) error {
	it, err := db.NewIter(&pebble.IterOptions{LowerBound: st.dbKey(lo), UpperBound: st.dbKey(hi)})
	if err != nil {
		return fmt.Errorf("store %s: %w", st.name, err)
	}
	for it.First(); it.Valid(); it.Next() {
		if err := fn(it.Key()[len(st.prefix):], it.Value()); err != nil {
			it.Close()
			return err
		}
	}
	return it.Close()
}

// windowJSON is one window in WindowQueryHandler's answer.
type windowJSON[A any] struct {
	Start int64 `json:"start"` // ms since the epoch
	End   int64 `json:"end"`
	Value A     `json:"value"`
}

// WindowQueryHandler serves GET ?key=<key>&from=<ms>&to=<ms> on the window
// or session store named store (from defaults to 0, to to the far future):
// 200 with a JSON list of {start, end, value}, oldest first; a key whose
// task runs on another instance is forwarded to it, as QueryHandler does.
func WindowQueryHandler[K, A any](a *App, store string, ks Serde[K], as Serde[A], parse func(string) (K, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		k, err := parse(q.Get("key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		from, to := int64(0), int64(math.MaxInt64)
		for _, p := range []struct {
			name string
			v    *int64
		}{{"from", &from}, {"to", &to}} {
			if s := q.Get(p.name); s != "" {
				if *p.v, err = strconv.ParseInt(s, 10, 64); err != nil {
					http.Error(w, fmt.Sprintf("%s: %v", p.name, err), http.StatusBadRequest)
					return
				}
			}
		}
		ws, err := QueryWindows(a, store, ks, as, k, time.UnixMilli(from), time.UnixMilli(to))
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
		default:
			out := make([]windowJSON[A], 0, len(ws))
			for _, x := range ws {
				out = append(out, windowJSON[A]{Start: x.Window.Start.UnixMilli(), End: x.Window.End.UnixMilli(), Value: x.Value})
			}
			w.Header().Set("Content-Type", "application/json")
			json.NewEncoder(w).Encode(out)
		}
	})
}
