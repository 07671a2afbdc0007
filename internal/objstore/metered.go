package objstore

import (
	"context"
	"errors"
	"io"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metered wraps s so that every request it serves is counted in reg
// (docs/metrics.md):
//
//	sluice_objstore_requests_total{op}   requests, by operation
//	sluice_objstore_bytes_total{op}      object bytes sent (put, put_file) and received (get)
//	sluice_objstore_request_seconds{op}  request latency
//	sluice_objstore_errors_total{op}     failed requests (not-found answers and cancelled requests aside)
//
// with op one of put, get, size, delete, list, and, for a store with the
// local capabilities (localfs: Linker, Shrinker and Mapper), put_file,
// shrink and map: what an operator pays an object store for, and what the
// cluster figures measure (objects PUT per second). A store with some but
// not all of those capabilities is returned unwrapped, so that none is
// hidden. A nil reg returns s.
func Metered(s Storage, reg prometheus.Registerer) Storage {
	if reg == nil {
		return s
	}
	lk, isLinker := s.(Linker)
	sh, isShrinker := s.(Shrinker)
	mp, isMapper := s.(Mapper)
	local := isLinker && isShrinker && isMapper
	if !local && (isLinker || isShrinker || isMapper) {
		return s
	}
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "objstore",
		Name: "requests_total", Help: "Object store requests, by operation."}, []string{"op"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "objstore",
		Name: "bytes_total", Help: "Object bytes sent (put, put_file) and received (get)."}, []string{"op"})
	secs := prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "sluice", Subsystem: "objstore",
		Name: "request_seconds", Help: "Object store request latency, by operation.",
		Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18)}, []string{"op"})
	errs := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "objstore",
		Name: "errors_total", Help: "Failed object store requests (not-found answers and cancelled requests aside), by operation."}, []string{"op"})
	reg.MustRegister(reqs, bytes, secs, errs)
	op := func(name string) meteredOp {
		return meteredOp{reqs: reqs.WithLabelValues(name), secs: secs.WithLabelValues(name), errs: errs.WithLabelValues(name)}
	}
	m := &metered{s: s, put: op("put"), get: op("get"), size: op("size"), del: op("delete"), list: op("list"),
		putBytes: bytes.WithLabelValues("put"), getBytes: bytes.WithLabelValues("get")}
	if !local {
		return m
	}
	return &meteredLocal{metered: m, lk: lk, sh: sh, mp: mp,
		putFile: op("put_file"), shrink: op("shrink"), mapOp: op("map"), putFileBytes: bytes.WithLabelValues("put_file")}
}

// meteredOp is one operation's figures.
type meteredOp struct {
	reqs prometheus.Counter
	secs prometheus.Observer
	errs prometheus.Counter
}

// start counts a request and returns what ends it.
func (o meteredOp) start() func(error) {
	o.reqs.Inc()
	began := time.Now()
	return func(err error) {
		o.secs.Observe(time.Since(began).Seconds())
		if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, context.Canceled) {
			o.errs.Inc()
		}
	}
}

type metered struct {
	s                         Storage
	put, get, size, del, list meteredOp
	putBytes, getBytes        prometheus.Counter
}

func (m *metered) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	done := m.put.start()
	err := m.s.Put(ctx, key, r, size)
	done(err)
	if err == nil {
		m.putBytes.Add(float64(size))
	}
	return err
}

func (m *metered) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	done := m.get.start()
	err := m.s.ReadAt(ctx, key, p, off)
	done(err)
	if err == nil {
		m.getBytes.Add(float64(len(p)))
	}
	return err
}

func (m *metered) Size(ctx context.Context, key string) (int64, error) {
	done := m.size.start()
	n, err := m.s.Size(ctx, key)
	done(err)
	return n, err
}

func (m *metered) Delete(ctx context.Context, key string) error {
	done := m.del.start()
	err := m.s.Delete(ctx, key)
	done(err)
	return err
}

func (m *metered) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	done := m.list.start()
	l, err := m.s.List(ctx, prefix)
	done(err)
	return l, err
}

func (m *metered) Close() error { return m.s.Close() }

// meteredLocal is metered with a local store's capabilities.
type meteredLocal struct {
	*metered
	lk                     Linker
	sh                     Shrinker
	mp                     Mapper
	putFile, shrink, mapOp meteredOp
	putFileBytes           prometheus.Counter
}

var (
	_ Linker   = (*meteredLocal)(nil)
	_ Shrinker = (*meteredLocal)(nil)
	_ Mapper   = (*meteredLocal)(nil)
)

func (m *meteredLocal) PutFile(ctx context.Context, key, path string) error {
	done := m.putFile.start()
	err := m.lk.PutFile(ctx, key, path)
	done(err)
	if err == nil {
		if fi, serr := os.Stat(path); serr == nil {
			m.putFileBytes.Add(float64(fi.Size()))
		}
	}
	return err
}

func (m *meteredLocal) Shrink(ctx context.Context, key string, size int64) error {
	done := m.shrink.start()
	err := m.sh.Shrink(ctx, key, size)
	done(err)
	return err
}

func (m *meteredLocal) Map(ctx context.Context, key string) ([]byte, func(), error) {
	done := m.mapOp.start()
	data, unmap, err := m.mp.Map(ctx, key)
	done(err)
	return data, unmap, err
}
