package streams

import (
	"fmt"

	"github.com/cockroachdb/pebble"
	"github.com/cockroachdb/pebble/vfs"
	"github.com/twmb/franz-go/pkg/kgo"
)

// applyGlobal writes a record of a global table's topic to its store at
// once; it reports whether r was one.
func (d *TestDriver) applyGlobal(r *kgo.Record) (bool, error) {
	g := d.topo.globalFor(r.Topic)
	if g == nil {
		return false, nil
	}
	if d.globals == nil {
		opts := storeOptions()
		opts.FS = vfs.NewMem()
		db, err := pebble.Open("", opts)
		if err != nil {
			return true, err
		}
		d.dbs = append(d.dbs, db)
		d.globals = &globalState{db: db, stores: map[string]*kvStore{}, byTopic: map[string]*kvStore{}}
		for _, g := range d.topo.globals {
			s := newKVStore(db, g.store)
			d.globals.stores[g.store], d.globals.byTopic[g.topic] = s, s
		}
	}
	k := d.globals.byTopic[r.Topic].dbKey(r.Key)
	if r.Value == nil {
		return true, d.globals.db.Delete(k, pebble.NoSync)
	}
	return true, d.globals.db.Set(k, r.Value, pebble.NoSync)
}

// globalGet reads k from a global store.
func (d *TestDriver) globalGet(store string, k []byte) ([]byte, bool, error) {
	if d.topo.globals[store] == nil {
		return nil, false, fmt.Errorf("streams: no global store %q", store)
	}
	if d.globals == nil {
		return nil, false, nil
	}
	return d.globals.get(store, k)
}
