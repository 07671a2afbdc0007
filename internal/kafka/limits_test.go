package kafka_test

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/config"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// The network limits, tested on a real broker over real TCP connections.
// Every wait is a generous upper bound; nothing asserts how fast a limit
// acts, only that it does.

// startLimited starts a broker with the admin listener on (for /metrics)
// and the limits fn sets.
func startLimited(t *testing.T, fn func(*config.Config)) *testbroker.Broker {
	t.Helper()
	return testbroker.Start(t, testbroker.WithConfig(func(c *config.Config) {
		c.AdminListen = "127.0.0.1:0"
		fn(c)
	}))
}

// metric reads one sample from the broker's /metrics: name with the
// label string as exposed (`reason="idle"`), or "" for none.
func metric(t testing.TB, b *testbroker.Broker, name, labels string) (float64, error) {
	t.Helper()
	resp, err := http.Get("http://" + b.Server().AdminAddr() + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	want := name + " "
	if labels != "" {
		want = name + "{" + labels + "} "
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), want); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("metric %s{%s} not exposed", name, labels)
}

// waitMetric waits until the sample satisfies ok.
func waitMetric(t testing.TB, b *testbroker.Broker, name, labels, what string, ok func(float64) bool) {
	t.Helper()
	testbroker.Eventually(t, time.Minute, what, func() error {
		v, err := metric(t, b, name, labels)
		if err != nil {
			return err
		}
		if !ok(v) {
			return fmt.Errorf("%s{%s} = %v", name, labels, v)
		}
		return nil
	})
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func equal(n float64) func(float64) bool   { return func(v float64) bool { return v == n } }

func dialFrom(t testing.TB, local, addr string) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if local != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(local)}
	}
	c, err := d.Dial("tcp", addr)
	if err == nil {
		t.Cleanup(func() { c.Close() })
	}
	return c, err
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := dialFrom(t, "", addr)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// requestFrame frames a request of a version that is not flexible
// (header v1: key, version, correlation id, client id).
func requestFrame(req kmsg.Request, corr int32) []byte {
	b := binary.BigEndian.AppendUint32(nil, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(req.GetVersion()))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// apiVersions is a whole ApiVersions v0 request frame.
func apiVersions(corr int32) []byte { return requestFrame(kmsg.NewPtrApiVersionsRequest(), corr) }

// roundTrip sends an ApiVersions request on c and reads its response.
func roundTrip(c net.Conn, corr int32) error {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.SetDeadline(time.Time{})
	if _, err := c.Write(apiVersions(corr)); err != nil {
		return err
	}
	return readResponse(c, corr)
}

func readResponse(c net.Conn, corr int32) error {
	var sz [4]byte
	if _, err := io.ReadFull(c, sz[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(sz[:]))
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if got := int32(binary.BigEndian.Uint32(body)); got != corr {
		return fmt.Errorf("correlation id %d, want %d", got, corr)
	}
	return nil
}

// closedByBroker reports whether the broker closed c: a read ends with EOF
// or a reset within the bound (bytes answered before are skipped).
func closedByBroker(c net.Conn, within time.Duration) error {
	c.SetReadDeadline(time.Now().Add(within))
	buf := make([]byte, 4096)
	for {
		_, err := c.Read(buf)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			return fmt.Errorf("still open after %v", within)
		default:
			return nil // EOF or reset
		}
	}
}

// TestRequestBytesBounded is the tester's attack: 40 connections each
// announce a 100 MiB request and send 8 MiB of it. The bytes the broker
// holds for requests stay within queued_max_request_bytes plus one request
// (measured on its reservations and on the Go heap of this process, where
// the broker runs), readers past the budget wait instead of reading, and
// everything is given back when the connections close.
func TestRequestBytesBounded(t *testing.T) {
	const (
		conns    = 40
		announce = 100 << 20
		send     = 8 << 20
		budget   = 64 << 20
	)
	b := startLimited(t, func(c *config.Config) {
		c.MaxRequestBytes = announce
		c.QueuedMaxRequestBytes = budget
		c.RequestReadTimeout = 10 * time.Minute // this test is about memory, not slow clients
	})
	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	base := heap()

	chunk := make([]byte, 64<<10)
	var wg sync.WaitGroup
	cs := make([]net.Conn, conns)
	for i := range cs {
		cs[i] = dial(t, b.Addr())
		wg.Go(func() {
			c := cs[i]
			// Writes past what the broker reads block once the kernel's
			// buffers fill: that is the backpressure, so a write timing
			// out is expected.
			c.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := c.Write(binary.BigEndian.AppendUint32(nil, announce)); err != nil {
				return
			}
			for sent := 0; sent < send; sent += len(chunk) {
				if _, err := c.Write(chunk); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	// The broker admits requests while under the budget: one 100 MiB
	// request passes 64 MiB, and the other 39 wait.
	waitMetric(t, b, "sluice_kafka_queued_request_waits_total", "", "readers waiting for the budget", atLeast(conns-1))
	var peak uint64
	for range 10 { // time for the admitted connection's 8 MiB to be read
		peak = max(peak, heap())
		v, err := metric(t, b, "sluice_kafka_queued_request_bytes", "")
		if err != nil {
			t.Fatal(err)
		}
		if v > budget+announce {
			t.Fatalf("%v bytes of requests reserved, over the budget %d plus one request", v, budget)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// One admitted request's buffer (8 MiB read, grown to 16 MiB) plus a
	// 64 KiB read buffer per connection, with room to spare; without the
	// budget the 40 connections held 40 x 16 MiB.
	if grown := int64(peak) - int64(base); grown > 48<<20 {
		t.Fatalf("heap grew by %d MiB under %d connections announcing %d MiB and sending %d MiB each; want < 48 MiB",
			grown>>20, conns, announce>>20, send>>20)
	}

	for _, c := range cs {
		c.Close()
	}
	waitMetric(t, b, "sluice_kafka_connections", "", "connections closed", equal(0))
	waitMetric(t, b, "sluice_kafka_queued_request_bytes", "", "request bytes released", equal(0))
	if grown := int64(heap()) - int64(base); grown > 16<<20 {
		t.Fatalf("heap still %d MiB above the start after the connections closed", grown>>20)
	}
}

// TestQueuedRequestBytesBackpressure: when the requests in flight reach
// queued_max_request_bytes, another connection's request is not read (not
// answered) until bytes are released, then it is. One large frame stalled
// by its client (the fault checker's case) does not hold the budget.
func TestQueuedRequestBytesBackpressure(t *testing.T) {
	b := startLimited(t, func(c *config.Config) {
		c.MaxRequestBytes = 1 << 20
		c.QueuedMaxRequestBytes = 1 << 20
	})
	// A frame of more than a quarter of the budget takes the lane of large
	// frames: announced in full and stalled, it holds nothing others need.
	huge := dial(t, b.Addr())
	if _, err := huge.Write(append(binary.BigEndian.AppendUint32(nil, 1<<20), make([]byte, 1000)...)); err != nil {
		t.Fatal(err)
	}
	probe := dial(t, b.Addr())
	if err := roundTrip(probe, 5); err != nil {
		t.Fatalf("a small request waited behind one large stalled frame: %v", err)
	}
	// Four quarter-budget requests announced, 1000 bytes of each sent:
	// they hold the whole budget while the rest is awaited.
	var parts []net.Conn
	for range 4 {
		c := dial(t, b.Addr())
		if _, err := c.Write(append(binary.BigEndian.AppendUint32(nil, 1<<18), make([]byte, 1000)...)); err != nil {
			t.Fatal(err)
		}
		parts = append(parts, c)
	}
	waitMetric(t, b, "sluice_kafka_queued_request_bytes", "", "the partial requests reserved", equal(1<<20))

	small := dial(t, b.Addr())
	if _, err := small.Write(apiVersions(7)); err != nil {
		t.Fatal(err)
	}
	waitMetric(t, b, "sluice_kafka_queued_request_waits_total", "", "the small request waiting", atLeast(1))
	small.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := small.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a request was answered while the budget was spent: read returned %v", err)
	}
	parts[0].Close() // that partial request's reservation is released
	small.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := readResponse(small, 7); err != nil {
		t.Fatalf("the waiting request was not answered once bytes were released: %v", err)
	}
	for _, c := range parts[1:] {
		c.Close()
	}
	huge.Close()
	waitMetric(t, b, "sluice_kafka_queued_request_bytes", "", "request bytes released", equal(0))
}

// TestIdleConnectionsClosed: connections that send nothing, or nothing
// after a request, are closed after connections_max_idle; one waiting on a
// long-polling Fetch is not idle and gets its answer.
func TestIdleConnectionsClosed(t *testing.T) {
	const idle = time.Second
	b := startLimited(t, func(c *config.Config) { c.ConnectionsMaxIdle = idle })
	topic := "idle-fetch"
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)

	silent := make([]net.Conn, 20)
	for i := range silent {
		silent[i] = dial(t, b.Addr())
	}
	used := dial(t, b.Addr())
	if err := roundTrip(used, 1); err != nil {
		t.Fatal(err)
	}

	// A Fetch waiting 3 idle periods for data that never comes.
	polling := dial(t, b.Addr())
	req := kmsg.NewPtrFetchRequest()
	req.Version = 4
	req.ReplicaID = -1
	req.MaxWaitMillis = int32(3 * idle / time.Millisecond)
	req.MinBytes = 1
	req.MaxBytes = 1 << 20
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes = 1 << 20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	fetch := requestFrame(req, 9)
	if _, err := polling.Write(fetch); err != nil {
		t.Fatal(err)
	}

	for i, c := range append(silent, used) {
		if err := closedByBroker(c, 30*time.Second); err != nil {
			t.Fatalf("idle connection %d: %v", i, err)
		}
	}
	polling.SetReadDeadline(time.Now().Add(30 * time.Second))
	if err := readResponse(polling, 9); err != nil {
		t.Fatalf("connection waiting on a long-polling Fetch: %v", err)
	}
	waitMetric(t, b, "sluice_kafka_connections_closed_total", `reason="idle"`, "idle closes counted", atLeast(21))
}

// TestSlowRequestsClosed: slowloris connections, which begin a request and
// send it a byte at a time, or stop inside the size prefix, are closed after
// request_read_timeout, while a franz-go client keeps producing.
func TestSlowRequestsClosed(t *testing.T) {
	b := startLimited(t, func(c *config.Config) { c.RequestReadTimeout = time.Second })
	topic := "slowloris"
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	good := b.Client(t, kgo.DefaultProduceTopic(topic))

	const slow = 50
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(stop); wg.Wait() }()
	cs := make([]net.Conn, slow+1)
	for i := range slow {
		cs[i] = dial(t, b.Addr())
		wg.Go(func() {
			c := cs[i]
			if _, err := c.Write(binary.BigEndian.AppendUint32(nil, 1<<20)); err != nil {
				return
			}
			for { // far slower than the timeout allows, never finishing
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := c.Write([]byte{0}); err != nil {
					return
				}
			}
		})
	}
	cs[slow] = dial(t, b.Addr())
	if _, err := cs[slow].Write([]byte{0, 0}); err != nil { // half a size prefix
		t.Fatal(err)
	}

	ctx := t.Context()
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("during")}).FirstErr(); err != nil {
		t.Fatalf("produce beside slow connections: %v", err)
	}
	for i, c := range cs {
		if err := closedByBroker(c, 30*time.Second); err != nil {
			t.Fatalf("slow connection %d: %v", i, err)
		}
	}
	waitMetric(t, b, "sluice_kafka_connections_closed_total", `reason="request_timeout"`, "request timeouts counted", atLeast(slow+1))
	if err := good.ProduceSync(ctx, &kgo.Record{Value: []byte("after")}).FirstErr(); err != nil {
		t.Fatalf("produce after slow connections closed: %v", err)
	}
}

// TestMaxConnections: past max_connections a new connection is closed at
// once; when one closes, a new one is served again.
func TestMaxConnections(t *testing.T) {
	const limit = 5
	b := startLimited(t, func(c *config.Config) { c.MaxConnections = limit })
	open := make([]net.Conn, limit)
	for i := range open {
		open[i] = dial(t, b.Addr())
		if err := roundTrip(open[i], int32(i)); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, limit, err)
		}
	}
	extra := dial(t, b.Addr())
	if err := closedByBroker(extra, 30*time.Second); err != nil {
		t.Fatalf("connection past max_connections: %v", err)
	}
	waitMetric(t, b, "sluice_kafka_connections_refused_total", `reason="max_connections"`, "refusal counted", equal(1))
	for i, c := range open {
		if err := roundTrip(c, int32(100+i)); err != nil {
			t.Fatalf("admitted connection %d after a refusal: %v", i, err)
		}
	}

	open[0].Close()
	testbroker.Eventually(t, time.Minute, "a connection served after one closed", func() error {
		c := dial(t, b.Addr())
		defer c.Close()
		return roundTrip(c, 42)
	})
}

// TestMaxConnectionsPerIP: past max_connections_per_ip connections from one
// address, a new one from it is closed, while another address still gets
// in.
func TestMaxConnectionsPerIP(t *testing.T) {
	const limit = 3
	b := startLimited(t, func(c *config.Config) {
		c.MaxConnectionsPerIP = limit
		c.Listen = "0.0.0.0:0" // reachable from 127.0.0.1 and 127.0.0.2
	})
	_, port, _ := net.SplitHostPort(b.Addr())
	addr := net.JoinHostPort("127.0.0.1", port)
	for i := range limit {
		if err := roundTrip(dial(t, addr), int32(i)); err != nil {
			t.Fatalf("connection %d of %d: %v", i+1, limit, err)
		}
	}
	if err := closedByBroker(dial(t, addr), 30*time.Second); err != nil {
		t.Fatalf("connection past max_connections_per_ip: %v", err)
	}
	waitMetric(t, b, "sluice_kafka_connections_refused_total", `reason="max_connections_per_ip"`, "refusal counted", equal(1))

	other, err := dialFrom(t, "127.0.0.2", addr)
	if err != nil {
		t.Skipf("no second loopback address to dial from: %v", err)
	}
	if err := roundTrip(other, 9); err != nil {
		t.Fatalf("connection from another address: %v", err)
	}
}

// TestFetchMaxBytesCapsResponses: fetch_max_bytes (Kafka's broker
// fetch.max.bytes) cuts a Fetch that asks for more down to it; the first
// batch still comes whole (KIP-74) and the consumer reads everything.
func TestFetchMaxBytesCapsResponses(t *testing.T) {
	const limit = 64 << 10
	b := startLimited(t, func(c *config.Config) { c.FetchMaxBytes = limit })
	topic := "fetch-cap"
	testbroker.CreateTopic(t, b.Addr(), topic, 4, nil)
	cl := testbroker.NewClient(t, b.Addr(), kgo.DefaultProduceTopic(topic), kgo.ProducerBatchMaxBytes(16<<10))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	value := make([]byte, 1000)
	const records = 2000
	for range records {
		cl.Produce(ctx, &kgo.Record{Value: value}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	req := kmsg.NewPtrFetchRequest()
	req.MaxWaitMillis = 100
	req.MaxBytes = 100 << 20
	td, err := kadm.NewClient(cl).ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = td[topic].ID
	for p := range int32(4) {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.PartitionMaxBytes = 100 << 20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			if p.ErrorCode != 0 {
				t.Fatalf("partition %d: error %d", p.Partition, p.ErrorCode)
			}
			total += len(p.RecordBatches)
		}
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("fetch error %d", resp.ErrorCode)
	}
	if total == 0 || total > limit+16<<10 {
		t.Fatalf("a Fetch asking for 100 MiB got %d bytes of batches; want some, and at most %d plus one batch", total, limit)
	}
	cons := testbroker.NewClient(t, b.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxBytes(100<<20))
	for got := 0; got < records; {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d: %v", got, records, err)
		}
		got += fs.NumRecords()
	}
}
