package cluster

import (
	"fmt"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestLeaseTrafficFigures measures what a lease TTL costs in etcd
// traffic: one idle broker's renewals per second and the bytes each way
// on its etcd connection (renewals, gRPC keepalive pings; an idle broker
// sends nothing else), for TTLs of 2, 3 (the default) and 5 s. It asserts
// nothing. SLUICE_CLUSTER_FIGURES=1 go test ./internal/cluster/ -run TestLeaseTrafficFigures -v
func TestLeaseTrafficFigures(t *testing.T) {
	if os.Getenv("SLUICE_CLUSTER_FIGURES") != "1" {
		t.Skip("set SLUICE_CLUSTER_FIGURES=1 to measure")
	}
	lines := []string{"| lease TTL | renewals/s per broker | bytes/s to etcd | bytes/s from etcd |", "|---:|---:|---:|---:|"}
	for _, ttl := range []time.Duration{2 * time.Second, 3 * time.Second, 5 * time.Second} {
		c := newCluster(t, ttl, 3)
		var up, down atomic.Int64
		addr := countingProxy(t, strings.TrimPrefix(c.srv.Endpoint(), "http://"), &up, &down)
		tn := c.startVia(1, "http://"+addr)
		eventually(t, settle, "led", func() error { return c.check([]*testNode{tn}) })
		time.Sleep(2 * time.Second)
		s := tn.node.live.Load().s.(interface{ Renewals() int64 })
		r0, u0, d0 := s.Renewals(), up.Load(), down.Load()
		start := time.Now()
		time.Sleep(20 * time.Second)
		r1, u1, d1 := s.Renewals(), up.Load(), down.Load()
		el := time.Since(start).Seconds()
		t.Logf("lease TTL %v: %.2f renewals/s, %.0f B/s to etcd, %.0f B/s from etcd", ttl, float64(r1-r0)/el, float64(u1-u0)/el, float64(d1-d0)/el)
		lines = append(lines, fmt.Sprintf("| %v | %.2f | %.0f | %.0f |", ttl, float64(r1-r0)/el, float64(u1-u0)/el, float64(d1-d0)/el))
	}
	t.Log("\n" + strings.Join(lines, "\n"))
}

// countingProxy forwards connections to target, counting bytes each way;
// it returns its address.
func countingProxy(t *testing.T, target string, up, down *atomic.Int64) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	pump := func(dst, src net.Conn, n *atomic.Int64) {
		defer dst.Close()
		buf := make([]byte, 32<<10)
		for {
			k, err := src.Read(buf)
			if k > 0 {
				n.Add(int64(k))
				if _, err := dst.Write(buf[:k]); err != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				conn.Close()
				continue
			}
			go pump(u, conn, up)
			go pump(conn, u, down)
		}
	}()
	return ln.Addr().String()
}
