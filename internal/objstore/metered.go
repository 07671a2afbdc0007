package objstore

import (
	"context"
	"io"

	"github.com/prometheus/client_golang/prometheus"
)

// Metered wraps s so that every request it serves is counted in reg as
// sluice_objstore_requests_total{op} (put, get, size, delete, list) and
// sluice_objstore_bytes_total{op} (put, get): what an operator pays an
// object store for, and what the cluster figures measure (objects PUT per
// second). The optional capabilities (Linker, Shrinker) are not passed
// through: wrap only stores without them (S3). A nil reg returns s.
func Metered(s Storage, reg prometheus.Registerer) Storage {
	if reg == nil {
		return s
	}
	reqs := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "objstore",
		Name: "requests_total", Help: "Object store requests, by operation (put, get, size, delete, list)."}, []string{"op"})
	bytes := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "sluice", Subsystem: "objstore",
		Name: "bytes_total", Help: "Object bytes sent (put) and received (get)."}, []string{"op"})
	reg.MustRegister(reqs, bytes)
	return &metered{s: s,
		put: reqs.WithLabelValues("put"), get: reqs.WithLabelValues("get"), size: reqs.WithLabelValues("size"),
		del: reqs.WithLabelValues("delete"), list: reqs.WithLabelValues("list"),
		putBytes: bytes.WithLabelValues("put"), getBytes: bytes.WithLabelValues("get")}
}

type metered struct {
	s                         Storage
	put, get, size, del, list prometheus.Counter
	putBytes, getBytes        prometheus.Counter
}

func (m *metered) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	m.put.Inc()
	err := m.s.Put(ctx, key, r, size)
	if err == nil {
		m.putBytes.Add(float64(size))
	}
	return err
}

func (m *metered) ReadAt(ctx context.Context, key string, p []byte, off int64) error {
	m.get.Inc()
	err := m.s.ReadAt(ctx, key, p, off)
	if err == nil {
		m.getBytes.Add(float64(len(p)))
	}
	return err
}

func (m *metered) Size(ctx context.Context, key string) (int64, error) {
	m.size.Inc()
	return m.s.Size(ctx, key)
}

func (m *metered) Delete(ctx context.Context, key string) error {
	m.del.Inc()
	return m.s.Delete(ctx, key)
}

func (m *metered) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	m.list.Inc()
	return m.s.List(ctx, prefix)
}

func (m *metered) Close() error { return m.s.Close() }
