package fault

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// hostileMaxMessageBytes is max.message.bytes of the topic the hostile
// batches go to: a batch may then hold at most 32 MiB decompressed.
const hostileMaxMessageBytes = 1 << 20

// bombBytes of zeros in one record compress to a few KiB with zstd.
const bombBytes = 64 << 20

// rawConn is a Kafka client on a bare TCP connection: requests are
// encoded with kmsg, but what is sent is entirely up to the caller.
type rawConn struct {
	c    net.Conn
	corr int32
	f    *kmsg.RequestFormatter
}

func dialRaw(addr string) (*rawConn, error) {
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &rawConn{c: c, f: kmsg.NewRequestFormatter(kmsg.FormatterClientID("fault-hostile"))}, nil
}

func (rc *rawConn) Close() { rc.c.Close() }

func (rc *rawConn) write(b []byte) error {
	rc.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
	_, err := rc.c.Write(b)
	return err
}

// roundTrip sends req and reads its response.
func (rc *rawConn) roundTrip(req kmsg.Request) (kmsg.Response, error) {
	rc.corr++
	if err := rc.write(rc.f.AppendRequest(nil, req, rc.corr)); err != nil {
		return nil, err
	}
	rc.c.SetReadDeadline(time.Now().Add(time.Minute))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return nil, fmt.Errorf("reading the response size: %w", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 64<<20 {
		return nil, fmt.Errorf("response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rc.c, body); err != nil {
		return nil, fmt.Errorf("reading the response: %w", err)
	}
	if corr := int32(binary.BigEndian.Uint32(body)); corr != rc.corr {
		return nil, fmt.Errorf("correlation id %d, want %d", corr, rc.corr)
	}
	body = body[4:]
	if req.IsFlexible() && req.Key() != int16(kmsg.ApiVersions) {
		// Response header v1: tagged fields; the broker sends none.
		tags, k := binary.Uvarint(body)
		if k <= 0 || tags != 0 {
			return nil, fmt.Errorf("response header tags % x", body[:min(len(body), 8)])
		}
		body = body[k:]
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", resp, err)
	}
	return resp, nil
}

// expectClosed waits for the broker to close the connection. Answering
// first is fine; keeping it open is not.
func (rc *rawConn) expectClosed() error {
	rc.c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for {
		_, err := rc.c.Read(buf)
		var ne *net.OpError
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded):
			return errors.New("connection still open 30 s later")
		case errors.As(err, &ne):
			return nil // reset
		default:
			return err
		}
	}
}

// rawFrame is a size-prefixed request with header v1 (api key, version,
// correlation id, client id) and the given body.
func rawFrame(key, version int16, body []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, 1)
	b = binary.BigEndian.AppendUint16(b, 7)
	b = append(b, "hostile"...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func produceRequest(topic string, batch []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Version = 9
	req.Acks, req.TimeoutMillis = -1, 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Records = batch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// hostile sends what a broken or malicious client would, while the real
// workloads run, and checks each gets the answer Kafka gives (or the
// connection closed) and that nothing of a refused batch is stored. The
// broker must keep serving everyone else, and never crash; the runner
// checks that after this returns, and the memory sampler watches what the
// bombs and stalled frames cost.
type hostile struct {
	once sync.Once
	bomb []byte
	err  error
}

func (h *hostile) zstdBomb() ([]byte, error) {
	h.once.Do(func() {
		h.bomb, h.err = batch.Build(4, time.Now().UnixMilli(), []kmsg.Record{{Key: []byte("bomb"), Value: make([]byte, bombBytes)}})
	})
	return h.bomb, h.err
}

func (h *hostile) run(r *run, i int) *verdict {
	t, tg, rng := r.t, r.tg, r.rng
	t.Helper()
	v := &verdict{check: fmt.Sprintf("hostile input to broker %d gets Kafka's answers; nothing refused is stored", i)}
	bad := &v.bad
	addr := tg.seeds[i]

	end0, err := hostileEnd(tg)
	if err != nil {
		bad.add("end offset before: %v", err)
	}

	// Frames that are not Kafka: the connection is closed, nothing else.
	garbage := make([]byte, 200)
	for j := range garbage {
		garbage[j] = byte(rng.IntN(256))
	}
	// Read as the next frame's size, garbage must be invalid (negative):
	// a size under max_request_bytes is a frame the broker rightly waits
	// for, not garbage.
	garbage[0] = 0xde
	metadata := rawFrame(int16(kmsg.Metadata), 1, []byte{0xff, 0xff, 0xff, 0xff})
	frames := []struct {
		name string
		data []byte
	}{
		{"an HTTP request", []byte("GET / HTTP/1.1\r\nHost: sluice\r\n\r\n")},
		{"a 2 GiB frame announced", []byte{0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 1}},
		{"a negative frame size", []byte{0xff, 0xff, 0xff, 0xf0, 0, 1, 2, 3}},
		{"a frame too small for a header", []byte{0, 0, 0, 3, 0, 3, 0}},
		{"an unknown API key", rawFrame(31000, 0, nil)},
		{"a Produce request with a garbage body", rawFrame(int16(kmsg.Produce), 9, garbage)},
		{"a Metadata request cut short", metadata[:len(metadata)-2]},
		{"a valid request, then garbage", append(append([]byte{}, metadata...), garbage...)},
	}
	for _, f := range frames {
		rc, err := dialRaw(addr)
		if err != nil {
			bad.add("%s: dialing broker %d: %v", f.name, i, err)
			continue
		}
		if err := rc.write(f.data); err != nil {
			bad.add("%s: write: %v", f.name, err)
		} else if f.name == "a Metadata request cut short" {
			// Half a frame, then the client goes away.
		} else if err := rc.expectClosed(); err != nil {
			bad.add("%s: %v", f.name, err)
		}
		rc.Close()
	}

	// Bad batches to the hostile topic's leader: refused with the error
	// Kafka gives, the connection kept, nothing stored.
	good := func() []byte {
		b, _ := batch.Build(0, time.Now().UnixMilli(), []kmsg.Record{{Value: []byte("good")}})
		return b
	}
	gzipLie := func() []byte {
		b, _ := batch.Build(0, time.Now().UnixMilli(), []kmsg.Record{{Value: []byte("not gzip at all")}})
		attrs := binary.BigEndian.Uint16(b[batch.OffAttributes:])
		binary.BigEndian.PutUint16(b[batch.OffAttributes:], attrs|1)
		binary.BigEndian.PutUint32(b[batch.OffCRC:], batch.ComputeCRC(b))
		return b
	}
	badCRC := func() []byte {
		b := good()
		b[len(b)-1] ^= 0xff
		return b
	}
	bomb, err := h.zstdBomb()
	if err != nil {
		t.Fatalf("building the zstd bomb: %v", err)
	}
	goods := 0
	ambiguous := false
	for _, c := range []struct {
		name  string
		batch []byte
		want  error
	}{
		{"a good batch", good(), nil},
		{"a batch saying gzip over a payload that is not (CRC correct)", gzipLie(), kerr.CorruptMessage},
		{"a batch with a wrong CRC", badCRC(), kerr.CorruptMessage},
		{fmt.Sprintf("a zstd batch of %d bytes holding %d MiB of zeros", len(bomb), bombBytes>>20), bomb, kerr.MessageTooLarge},
		{"a good batch after the bad ones", good(), nil},
	} {
		code, msg, unsure, err := produceToLeaderRetries(tg, c.batch)
		ambiguous = ambiguous || unsure
		switch {
		case err != nil:
			bad.add("%s: %v", c.name, err)
			ambiguous = true
		case kerr.ErrorForCode(code) != c.want:
			bad.add("%s: answered %v (%s), want %v", c.name, kerr.ErrorForCode(code), msg, c.want)
			if c.want != nil {
				ambiguous = true // perhaps stored
			}
		case c.want == nil:
			goods++
		}
	}
	// Several bombs at once, each on its own connection: the broker's
	// decompression budget, not its memory, takes the blow.
	var wg sync.WaitGroup
	var mu sync.Mutex
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			code, msg, err := produceToLeader(tg, bomb)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				bad.add("concurrent bomb: %v", err)
				ambiguous = true
			} else if code != kerr.MessageTooLarge.Code {
				bad.add("concurrent bomb: answered %v (%s), want MESSAGE_TOO_LARGE", kerr.ErrorForCode(code), msg)
				ambiguous = true
			}
		}()
	}
	wg.Wait()
	if end1, err := hostileEnd(tg); err != nil {
		bad.add("end offset after: %v", err)
	} else if end0 >= 0 && !ambiguous && end1 != end0+int64(goods) {
		bad.add("STORED: the hostile topic's end offset went from %d to %d, but only %d good records were acknowledged", end0, end1, goods)
	}
	stalledFor := h.stalledFrames(addr, bad)
	v.ok = fmt.Sprintf("%d malformed frames, 3 bad batches, 5 zstd bombs of %d KiB; 2 frames announcing %d MiB left half sent, another client answered %v later",
		len(frames), len(bomb)>>10, stalledAnnounce>>20, stalledFor.Round(10*time.Millisecond))
	return v
}

// retriable are the produce errors a client retries after a fault: the
// leader moved or is not ready yet.
var retriable = map[int16]bool{
	kerr.NotLeaderForPartition.Code:   true,
	kerr.LeaderNotAvailable.Code:      true,
	kerr.UnknownTopicOrPartition.Code: true,
	kerr.RequestTimedOut.Code:         true,
	kerr.NotEnoughReplicas.Code:       true,
}

// produceToLeader sends one produce of b to partition 0 of the hostile
// topic on a fresh connection to its leader, retrying while the leader
// moves. err is set when no answer came.
func produceToLeader(tg *target, b []byte) (code int16, msg string, err error) {
	code, msg, _, err = produceToLeaderRetries(tg, b)
	return code, msg, err
}

// produceToLeaderRetries is produceToLeader also saying whether an attempt
// may have stored b without an answer saying so (a timeout or a broken
// connection after the request was sent), so a retry may store it twice.
func produceToLeaderRetries(tg *target, b []byte) (code int16, msg string, unsure bool, err error) {
	deadline := time.Now().Add(time.Minute)
	for {
		var addr string
		addr, err = hostileLeader(tg)
		if err == nil {
			var rc *rawConn
			rc, err = dialRaw(addr)
			if err == nil {
				var resp kmsg.Response
				resp, err = rc.roundTrip(produceRequest(hostileTopic, b))
				rc.Close()
				if err != nil {
					unsure = true
				} else {
					p := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0]
					code, msg = p.ErrorCode, ""
					if p.ErrorMessage != nil {
						msg = *p.ErrorMessage
					}
					if !retriable[code] {
						return code, msg, unsure, nil
					}
					if code == kerr.RequestTimedOut.Code {
						unsure = true
					}
					err = fmt.Errorf("retriable %v (%s)", kerr.ErrorForCode(code), msg)
				}
			}
		}
		if time.Now().After(deadline) {
			return 0, "", unsure, fmt.Errorf("no answer within a minute: %w", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// hostileLeader is the address of the hostile topic's partition 0 leader.
func hostileLeader(tg *target) (string, error) {
	if tg.cluster == nil {
		return tg.seeds[0], nil
	}
	cl := tg.client("hostile-md")
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := kadm.NewClient(cl).Metadata(ctx, hostileTopic)
	if err != nil {
		return "", err
	}
	p, ok := md.Topics[hostileTopic].Partitions[0]
	if !ok || p.Leader < 0 {
		return "", fmt.Errorf("partition 0 has no leader")
	}
	for _, b := range md.Brokers {
		if b.NodeID == p.Leader {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))), nil
		}
	}
	return "", fmt.Errorf("leader %d not among the brokers", p.Leader)
}

func hostileEnd(tg *target) (int64, error) {
	cl := tg.client("hostile-end")
	defer cl.Close()
	deadline := time.Now().Add(time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		l, err := kadm.NewClient(cl).ListEndOffsets(ctx, hostileTopic)
		cancel()
		if err == nil {
			err = l.Error()
		}
		if err == nil {
			if o, ok := l.Lookup(hostileTopic, 0); ok {
				return o.Offset, nil
			}
			err = errors.New("no partition 0")
		}
		if time.Now().After(deadline) {
			return -1, err
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// stalledAnnounce is what a stalled frame announces: under
// max_request_bytes (100 MiB), so the broker must take it, and over the
// broker's whole budget for queued requests (an eighth of the memory
// budget).
const stalledAnnounce = 90 << 20

// stalledFrames opens connections to the broker at addr that announce
// large frames and send only the first 2 MiB, as a slow or malicious client
// would, and checks that the broker keeps serving other clients meanwhile:
// a request on a new connection must be answered while the stalled frames
// are still open. If instead the broker serves no one until it drops the
// stalled connections (its request read timeout), that is a failure: any
// client could freeze the broker, again and again. The time the request
// took is logged, not asserted.
func (h *hostile) stalledFrames(addr string, bad *problems) time.Duration {
	var stalled []*rawConn
	defer func() {
		for _, rc := range stalled {
			rc.Close()
		}
	}()
	for range 2 {
		rc, err := dialRaw(addr)
		if err != nil {
			bad.add("stalled frame: dial: %v", err)
			continue
		}
		head := binary.BigEndian.AppendUint32(nil, stalledAnnounce)
		if err := rc.write(append(head, make([]byte, 2<<20)...)); err != nil {
			bad.add("stalled frame: write: %v", err)
		}
		stalled = append(stalled, rc)
	}
	time.Sleep(100 * time.Millisecond) // let the broker read the announcements
	began := time.Now()
	answered := make(chan error, 1)
	go func() {
		rc, err := dialRaw(addr)
		if err == nil {
			req := kmsg.NewPtrApiVersionsRequest() // v0: the smallest request there is
			_, err = rc.roundTrip(req)
			rc.Close()
		}
		answered <- err
	}()
	for {
		select {
		case err := <-answered:
			if err != nil {
				bad.add("STALLED: while a client held a frame announcing %d MiB half sent, an ApiVersions request on another connection failed: %v (after %v)",
					stalledAnnounce>>20, err, time.Since(began).Round(100*time.Millisecond))
			}
			return time.Since(began)
		case <-time.After(100 * time.Millisecond):
		}
		for _, rc := range stalled {
			if closedByPeer(rc) {
				// The probe finishes on its own (its read deadline).
				bad.add("STALLED: while a client held a frame announcing %d MiB half sent, the broker answered no other client: "+
					"an ApiVersions request on another connection still had no answer %v later, when the broker closed the stalled connection",
					stalledAnnounce>>20, time.Since(began).Round(100*time.Millisecond))
				return time.Since(began)
			}
		}
	}
}

// closedByPeer says whether the broker has closed rc, without waiting.
func closedByPeer(rc *rawConn) bool {
	rc.c.SetReadDeadline(time.Now().Add(time.Millisecond))
	var b [1]byte
	_, err := rc.c.Read(b[:])
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
