package compat

import (
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// frame is a size-prefixed request: header v1 (api key, version,
// correlation id, client id) then body.
func frame(key, version int16, corr int32, body []byte) []byte {
	var b []byte
	b = binary.BigEndian.AppendUint32(b, 0)
	b = binary.BigEndian.AppendUint16(b, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 4)
	b = append(b, "test"...)
	b = append(b, body...)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

func dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// readFrame reads one size-prefixed response.
func readFrame(t testing.TB, c net.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		t.Fatalf("reading response size: %v", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n > 64<<20 {
		t.Fatalf("response size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatalf("reading response: %v", err)
	}
	return buf
}

// expectClosed waits for the broker to close c, failing if it answers
// instead or keeps the connection open for long.
func expectClosed(t testing.TB, c net.Conn, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 4096)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			// Some brokers answer before closing; that is fine as long as
			// they close.
			continue
		}
		switch {
		case err == nil:
			continue
		case errors.Is(err, io.EOF), isReset(err):
			return
		case errors.Is(err, os.ErrDeadlineExceeded):
			t.Fatalf("%s: connection still open after 30s", what)
		default:
			t.Fatalf("%s: unexpected read error %v", what, err)
		}
	}
}

func isReset(err error) bool {
	var ne *net.OpError
	return errors.As(err, &ne) && !ne.Timeout()
}

// TestMalformedFrames sends garbage on raw connections and checks that only
// that connection is closed: a client connected before keeps working, and
// new clients can connect.
func TestMalformedFrames(t *testing.T) {
	b := startBroker(t)
	topic := topicName(t)
	testbroker.CreateTopic(t, b.Addr(), topic, 1, nil)
	good := testbroker.NewClient(t, b.Addr())
	ctx := ctxFor(t, 2*time.Minute)
	produce := func(stage string) {
		t.Helper()
		if err := good.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(stage)}).FirstErr(); err != nil {
			t.Fatalf("%s: produce on the healthy connection: %v", stage, err)
		}
	}
	produce("before")

	valid := frame(int16(kmsg.Metadata), 1, 1, []byte{0xff, 0xff, 0xff, 0xff}) // Metadata v1, all topics
	cases := []struct {
		name string
		data []byte
	}{
		{"garbage bytes", []byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")},
		// Over max_request_bytes (100 MiB by default): Kafka closes the
		// connection at once rather than buffering.
		{"oversized size prefix", []byte{0x7f, 0xff, 0xff, 0xff, 0, 1, 2, 3}},
		{"1 GiB size prefix alone", []byte{0x40, 0, 0, 0}},
		{"negative size prefix", []byte{0xff, 0xff, 0xff, 0xf0, 0, 1, 2, 3}},
		{"zero size", []byte{0, 0, 0, 0}},
		{"size too small for a header", []byte{0, 0, 0, 3, 0, 3, 0}},
		{"unknown api key", frame(31000, 0, 7, nil)},
		{"truncated body", frame(int16(kmsg.Produce), 9, 8, []byte{0, 1, 2})},
		{"body of random bytes", frame(int16(kmsg.CreateTopics), 5, 9, []byte{0x13, 0x99, 0xff, 0x00, 0x7f, 0x80, 0x01, 0xfe, 0xee, 0xdd})},
		{"client id longer than the frame", func() []byte {
			f := frame(int16(kmsg.Metadata), 1, 1, nil)
			binary.BigEndian.PutUint16(f[12:], 5000)
			return f
		}()},
		{"valid request then garbage", append(append([]byte{}, valid...), 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 9, 1)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			conn := dial(t, b.Addr())
			if _, err := conn.Write(c.data); err != nil {
				t.Fatalf("write: %v", err)
			}
			expectClosed(t, conn, c.name)
			produce("after " + c.name)
			fresh := testbroker.NewClient(t, b.Addr())
			if err := fresh.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("fresh")}).FirstErr(); err != nil {
				t.Fatalf("a new client after %s: %v", c.name, err)
			}
		})
	}

	t.Run("half a frame then close", func(t *testing.T) {
		conn := dial(t, b.Addr())
		conn.Write(valid[:len(valid)-2])
		conn.Close()
		produce("after a half frame")
	})
}

// TestApiVersionsUnsupported: an ApiVersions request with a version the
// broker does not know gets UNSUPPORTED_VERSION (35) in a v0 response that
// still lists the supported versions, and the connection stays usable.
func TestApiVersionsUnsupported(t *testing.T) {
	b := startBroker(t)
	conn := dial(t, b.Addr())
	// A client from the future: ApiVersions v999 is flexible, so its
	// request header is v2 (an empty tag buffer after the client id) and its
	// body, which the broker cannot know, looks like v3's.
	future := kmsg.NewPtrApiVersionsRequest()
	future.Version = 3
	future.ClientSoftwareName = "future-client"
	future.ClientSoftwareVersion = "9.9"
	if _, err := conn.Write(frame(int16(kmsg.ApiVersions), 999, 42, append([]byte{0}, future.AppendTo(nil)...))); err != nil {
		t.Fatal(err)
	}
	buf := readFrame(t, conn)
	if len(buf) < 6 {
		t.Fatalf("response of %d bytes", len(buf))
	}
	if corr := int32(binary.BigEndian.Uint32(buf)); corr != 42 {
		t.Fatalf("correlation id %d, want 42", corr)
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = 0
	if err := resp.ReadFrom(buf[4:]); err != nil {
		t.Fatalf("decoding as ApiVersions v0: %v (% x)", err, buf[4:])
	}
	wantCode(t, "ApiVersions v999", resp.ErrorCode, kerr.UnsupportedVersion)
	var av *kmsg.ApiVersionsResponseApiKey
	for i := range resp.ApiKeys {
		if resp.ApiKeys[i].ApiKey == int16(kmsg.ApiVersions) {
			av = &resp.ApiKeys[i]
		}
	}
	if av == nil {
		t.Fatalf("UNSUPPORTED_VERSION response does not list ApiVersions' versions: %+v", resp.ApiKeys)
	}
	if av.MinVersion != 0 || av.MaxVersion < 3 {
		t.Errorf("ApiVersions versions %d-%d, want 0-3 or more", av.MinVersion, av.MaxVersion)
	}

	// The connection still works: a v3 (flexible) ApiVersions next. Its
	// request header is v2 (tagged fields); the response header stays v0.
	req := kmsg.NewPtrApiVersionsRequest()
	req.Version = 3
	req.ClientSoftwareName = "sluice-test"
	req.ClientSoftwareVersion = "1"
	body := req.AppendTo(nil)
	f := frame(int16(kmsg.ApiVersions), 3, 43, append([]byte{0}, body...)) // 0 = no header tags
	if _, err := conn.Write(f); err != nil {
		t.Fatal(err)
	}
	buf = readFrame(t, conn)
	if corr := int32(binary.BigEndian.Uint32(buf)); corr != 43 {
		t.Fatalf("correlation id %d, want 43", corr)
	}
	resp = kmsg.NewPtrApiVersionsResponse()
	resp.Version = 3
	if err := resp.ReadFrom(buf[4:]); err != nil {
		t.Fatalf("decoding ApiVersions v3: %v", err)
	}
	wantCode(t, "ApiVersions v3 after an unsupported one", resp.ErrorCode, nil)
	if len(resp.ApiKeys) < 10 {
		t.Errorf("ApiVersions v3 lists %d APIs", len(resp.ApiKeys))
	}

	// Every other API at an unsupported version: Kafka closes the connection
	// (it cannot know how to encode a response).
	t.Run("Metadata v999", func(t *testing.T) {
		c := dial(t, b.Addr())
		c.Write(frame(int16(kmsg.Metadata), 999, 1, nil))
		expectClosed(t, c, "Metadata v999")
	})
}
