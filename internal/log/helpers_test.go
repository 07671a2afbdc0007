package log

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/sluice-mq/sluice/internal/meta"
	"github.com/sluice-mq/sluice/internal/meta/embedded"
	"github.com/sluice-mq/sluice/internal/objstore"
	"github.com/sluice-mq/sluice/internal/objstore/localfs"
)

// clock is an injectable, settable clock.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// env is a data directory with real backends (localfs, embedded bbolt) that
// engines can be opened on, closed, crashed and reopened.
type env struct {
	t     testing.TB
	dir   string
	clk   *clock
	store objstore.Storage
	md    meta.Store
	cfg   func(*Config)
}

func newEnv(t testing.TB) *env {
	return &env{t: t, dir: t.TempDir(), clk: newClock()}
}

// openBackends opens the env's stores (as open does) so a test can wrap them.
func (v *env) openBackends() {
	v.t.Helper()
	if v.store == nil {
		s, err := localfs.New(filepath.Join(v.dir, "objects"))
		if err != nil {
			v.t.Fatal(err)
		}
		v.store = s
	}
	if v.md == nil {
		m, err := embedded.Open(filepath.Join(v.dir, "meta.db"))
		if err != nil {
			v.t.Fatal(err)
		}
		v.md = m
	}
}

func (v *env) open() *Engine {
	v.t.Helper()
	v.openBackends()
	cfg := DefaultConfig(filepath.Join(v.dir, "wal"))
	cfg.Now = v.clk.Now
	cfg.RetentionCheckInterval = time.Hour // tests drive cleanOnce
	cfg.CleanerBackoff = time.Hour
	cfg.RollInterval = time.Hour
	if v.cfg != nil {
		v.cfg(&cfg)
	}
	e, err := Open(context.Background(), cfg, v.store, v.md, nil, prometheus.NewRegistry())
	if err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { e.Close() })
	return e
}

// closeBackends closes the stores (as a process exit would) so reopen gets
// fresh handles on the same files.
func (v *env) closeBackends() {
	if v.md != nil {
		v.md.Close()
		v.md = nil
	}
	if v.store != nil {
		v.store.Close()
		v.store = nil
	}
}

// restart closes e cleanly and opens a new engine on the same directory.
func (v *env) restart(e *Engine) *Engine {
	v.t.Helper()
	if err := e.Close(); err != nil {
		v.t.Fatal(err)
	}
	v.closeBackends()
	return v.open()
}

// crash stops e without flushing anything and reopens.
func (v *env) crash(e *Engine) *Engine {
	v.t.Helper()
	e.halt()
	v.closeBackends()
	return v.open()
}

type rec struct {
	off   int64
	ts    int64
	key   string
	value []byte // nil for tombstones
}

// mkBatch builds a payload of n records valued "<prefix>-<i>".
func mkBatch(t testing.TB, codec int8, ts int64, n int, key func(i int) string, prefix string) []byte {
	t.Helper()
	recs := make([]kmsg.Record, n)
	for i := range recs {
		if key != nil {
			recs[i].Key = []byte(key(i))
		}
		recs[i].Value = fmt.Appendf(nil, "%s-%d", prefix, i)
	}
	b, err := batch.Build(codec, ts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mkRecords(t testing.TB, codec int8, ts int64, rs []rec) []byte {
	t.Helper()
	recs := make([]kmsg.Record, len(rs))
	for i, r := range rs {
		if r.key != "" {
			recs[i].Key = []byte(r.key)
		}
		recs[i].Value = r.value
		recs[i].TimestampDelta64 = r.ts - ts
	}
	b, err := batch.Build(codec, ts, recs)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustAppend(t testing.TB, p *Partition, b []byte) AppendResult {
	t.Helper()
	r, err := p.Append(context.Background(), b, -1)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// readAll reads every record from the log start to the high watermark.
func readAll(t testing.TB, p *Partition, maxBytes int32) []rec {
	t.Helper()
	var out []rec
	off := p.LogStartOffset()
	for off < p.HighWatermark() {
		r, err := p.Read(context.Background(), off, maxBytes, true)
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		if len(r.Records) == 0 {
			t.Fatalf("empty read at %d below hw %d", off, r.HighWatermark)
		}
		b := r.Records
		for len(b) > 0 {
			n, err := batch.Size(b)
			if err != nil {
				t.Fatal(err)
			}
			h, recs, err := decodeBatch(b[:n])
			if err != nil {
				t.Fatal(err)
			}
			for i := range recs {
				o := h.BaseOffset + int64(recs[i].OffsetDelta)
				if o < off {
					continue
				}
				var v []byte
				if recs[i].Value != nil {
					v = append([]byte{}, recs[i].Value...)
				}
				out = append(out, rec{off: o, ts: batch.RecordTimestamp(&h, &recs[i]), key: string(recs[i].Key), value: v})
			}
			off = max(off, h.LastOffset()+1)
			b = b[n:]
		}
	}
	return out
}

// decodeBatch decodes a batch whole, compressed or not, as tests read them.
func decodeBatch(b []byte) (batch.Header, []kmsg.Record, error) {
	x, err := batch.NewDecompressor(1<<30).Records(context.Background(), b, 1<<30)
	if err != nil {
		return batch.Header{}, nil, err
	}
	return x.Header, x.Records, nil
}
