package idempotence

import (
	"encoding/binary"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// proxy is a TCP proxy between Kafka clients and one broker that reads the
// Kafka framing (int32 size, then the message) in both directions so it can
// fail on purpose: after the broker has answered a Produce request it may
// close the connection instead of forwarding the response, which leaves the
// client unsure whether its batch was appended, so it retries it.
type proxy struct {
	t        testing.TB
	ln       net.Listener
	upstream atomic.Pointer[string]

	// dropProduce is the chance (0..1) that a Produce response is
	// swallowed and the connection cut; delay the chance a response is
	// held back for up to a few milliseconds.
	dropProduce, delay atomic.Uint64 // math.Float64bits
	dropped            atomic.Int64

	mu     sync.Mutex
	rng    *rand.Rand
	conns  map[net.Conn]struct{}
	closed bool
}

func newProxy(t testing.TB, seed uint64) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, ln: ln, rng: rand.New(rand.NewPCG(seed, 1)), conns: map[net.Conn]struct{}{}}
	go p.accept()
	t.Cleanup(p.close)
	return p
}

func (p *proxy) Addr() string { return p.ln.Addr().String() }

// SetUpstream points new connections at addr (a restarted broker).
func (p *proxy) SetUpstream(addr string) { p.upstream.Store(&addr) }

// SetFaults sets the chances of dropping a produce response and of
// delaying a response.
func (p *proxy) SetFaults(dropProduce, delay float64) {
	p.dropProduce.Store(f64bits(dropProduce))
	p.delay.Store(f64bits(delay))
}

// CutAll closes every open connection.
func (p *proxy) CutAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.Close()
	}
}

func (p *proxy) close() {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	p.ln.Close()
	p.CutAll()
}

func (p *proxy) chance(bits *atomic.Uint64) bool {
	f := f64(bits.Load())
	if f <= 0 {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.rng.Float64() < f
}

func (p *proxy) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

func (p *proxy) untrack(cs ...net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(p.conns, c)
	}
}

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *proxy) serve(client net.Conn) {
	up := p.upstream.Load()
	if up == nil {
		client.Close()
		return
	}
	broker, err := net.DialTimeout("tcp", *up, 5*time.Second)
	if err != nil {
		client.Close()
		return
	}
	if !p.track(client, broker) {
		client.Close()
		broker.Close()
		return
	}
	defer p.untrack(client, broker)

	// correlation id -> api key of the requests in flight on this connection.
	var keysMu sync.Mutex
	keys := map[int32]int16{}
	go func() {
		defer p.untrack(client, broker)
		for {
			msg, err := readFrame(client)
			if err != nil {
				return
			}
			if len(msg) >= 12 {
				keysMu.Lock()
				keys[int32(binary.BigEndian.Uint32(msg[8:]))] = int16(binary.BigEndian.Uint16(msg[4:]))
				keysMu.Unlock()
			}
			if _, err := broker.Write(msg); err != nil {
				return
			}
		}
	}()
	for {
		msg, err := readFrame(broker)
		if err != nil || len(msg) < 8 {
			return
		}
		corr := int32(binary.BigEndian.Uint32(msg[4:]))
		keysMu.Lock()
		key, ok := keys[corr]
		delete(keys, corr)
		keysMu.Unlock()
		if ok && key == 0 && p.chance(&p.dropProduce) {
			// The broker appended (or refused) the batch; the client
			// never hears which.
			p.dropped.Add(1)
			return
		}
		if p.chance(&p.delay) {
			time.Sleep(time.Duration(1+corr%3) * time.Millisecond)
		}
		if _, err := client.Write(msg); err != nil {
			return
		}
	}
}

// readFrame reads one size-prefixed Kafka message, returning it with its
// size prefix.
func readFrame(r io.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 0 || n > 256<<20 {
		return nil, io.ErrUnexpectedEOF
	}
	msg := make([]byte, 4+int(n))
	copy(msg, size[:])
	if _, err := io.ReadFull(r, msg[4:]); err != nil {
		return nil, err
	}
	return msg, nil
}

func f64bits(f float64) uint64 { return math.Float64bits(f) }
func f64(b uint64) float64     { return math.Float64frombits(b) }
