package s3_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"

	"github.com/sluice-mq/sluice/internal/objstore"
	"github.com/sluice-mq/sluice/internal/objstore/objstoretest"
	"github.com/sluice-mq/sluice/internal/objstore/s3"
	"github.com/sluice-mq/sluice/internal/objstore/s3/s3test"
)

// server starts a versitygw for one test (a fraction of a second), so no
// test depends on another's objects or on a server another test stopped.
func server(t *testing.T) *s3test.Server {
	t.Helper()
	return s3test.Start(t)
}

var seq atomic.Int64

func uniq(name string) string {
	return fmt.Sprintf("%s-%d", name, seq.Add(1))
}

func open(t testing.TB, cfg s3.Config) *s3.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := s3.New(ctx, cfg)
	if err != nil {
		t.Fatalf("s3.New(%s/%s): %v", cfg.Endpoint, cfg.Bucket, err)
	}
	return s
}

func reopen(cfg s3.Config) func(t *testing.T, old objstore.Storage) objstore.Storage {
	return func(t *testing.T, old objstore.Storage) objstore.Storage {
		if err := old.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		return open(t, cfg)
	}
}

// TestSuite runs the shared objstore suite twice against one real server:
// each store in its own fresh bucket at the bucket's root, and each store
// under its own prefix of one shared bucket (where other stores' objects
// must stay invisible).
func TestSuite(t *testing.T) {
	srv := server(t)
	t.Run("Bucket", func(t *testing.T) {
		var last s3.Config
		objstoretest.Run(t, func(t *testing.T) objstore.Storage {
			last = srv.Config(uniq("suite"))
			return open(t, last)
		}, objstoretest.WithReopen(func(t *testing.T, old objstore.Storage) objstore.Storage {
			return reopen(last)(t, old)
		}))
	})
	t.Run("Prefix", func(t *testing.T) {
		bucket := uniq("shared")
		var last s3.Config
		objstoretest.Run(t, func(t *testing.T) objstore.Storage {
			last = srv.Config(bucket)
			last.Prefix = uniq("clusters/c") // no trailing slash: New adds it
			return open(t, last)
		}, objstoretest.WithReopen(func(t *testing.T, old objstore.Storage) objstore.Storage {
			return reopen(last)(t, old)
		}))
	})
}

func BenchmarkStore(b *testing.B) {
	srv := s3test.Start(b)
	objstoretest.Bench(b, func(b *testing.B) objstore.Storage {
		return open(b, srv.Config(uniq("bench")))
	})
}

func TestConfigValidate(t *testing.T) {
	good := func() s3.Config {
		c := s3.DefaultConfig()
		c.Endpoint, c.Bucket = "127.0.0.1:9000", "sluice"
		return c
	}
	if err := good().Validate(); err != nil {
		t.Fatalf("good config: %v", err)
	}
	zero := s3.Config{Endpoint: "s3.amazonaws.com", Bucket: "sluice"}
	if err := zero.Validate(); err != nil {
		t.Fatalf("zero tuning fields must mean defaults: %v", err)
	}
	tests := []struct {
		key string
		mod func(*s3.Config)
	}{
		{"s3.endpoint", func(c *s3.Config) { c.Endpoint = "" }},
		{"s3.endpoint", func(c *s3.Config) { c.Endpoint = "http://127.0.0.1:9000" }},
		{"s3.endpoint", func(c *s3.Config) { c.Endpoint = "127.0.0.1:9000/bucket" }},
		{"s3.endpoint", func(c *s3.Config) { c.Endpoint = "127.0.0.1:0" }},
		{"s3.endpoint", func(c *s3.Config) { c.Endpoint = "127.0.0.1:http" }},
		{"s3.bucket", func(c *s3.Config) { c.Bucket = "" }},
		{"s3.bucket", func(c *s3.Config) { c.Bucket = "Upper_Case" }},
		{"s3.bucket", func(c *s3.Config) { c.Bucket = "ab" }},
		{"s3.prefix", func(c *s3.Config) { c.Prefix = "/abs" }},
		{"s3.prefix", func(c *s3.Config) { c.Prefix = "a//b" }},
		{"s3.prefix", func(c *s3.Config) { c.Prefix = "a/../b" }},
		{"s3.access_key", func(c *s3.Config) { c.SecretKey = "s" }},
		{"s3.secret_key", func(c *s3.Config) { c.AccessKey = "a" }},
		{"s3.session_token", func(c *s3.Config) { c.SessionToken = "t" }},
		{"s3.addressing", func(c *s3.Config) { c.Addressing = "dns" }},
		{"s3.dial_timeout", func(c *s3.Config) { c.DialTimeout = -1 }},
		{"s3.response_header_timeout", func(c *s3.Config) { c.ResponseHeaderTimeout = -1 }},
		{"s3.max_retries", func(c *s3.Config) { c.MaxRetries = -1 }},
		{"s3.part_size", func(c *s3.Config) { c.PartSize = 1 << 20 }},
	}
	for _, tc := range tests {
		c := good()
		tc.mod(&c)
		err := c.Validate()
		if !errors.Is(err, s3.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%+v: Validate = %v, want ErrInvalidConfig naming %s", c, err, tc.key)
		}
		// New refuses it the same way, before any network traffic.
		if _, err := s3.New(context.Background(), c); !errors.Is(err, s3.ErrInvalidConfig) {
			t.Errorf("New with bad %s = %v, want ErrInvalidConfig", tc.key, err)
		}
	}
}

func TestInvalidKeys(t *testing.T) {
	srv := server(t)
	s := open(t, srv.Config(uniq("keys")))
	defer s.Close()
	ctx := context.Background()
	for _, key := range []string{"", "/abs", "a//b", "a/", "../x", "a/./b", "a\\b", "nul\x00", "bad\xffutf8", strings.Repeat("k", 1025)} {
		if err := s.Put(ctx, key, bytes.NewReader(nil), 0); !errors.Is(err, s3.ErrInvalidKey) {
			t.Errorf("Put(%q) = %v, want ErrInvalidKey", key, err)
		}
		if err := s.ReadAt(ctx, key, make([]byte, 1), 0); !errors.Is(err, s3.ErrInvalidKey) {
			t.Errorf("ReadAt(%q) = %v, want ErrInvalidKey", key, err)
		}
	}
	// The prefix counts against S3's 1024-byte limit.
	cfg := srv.Config(uniq("keys"))
	cfg.Prefix = strings.Repeat("p", 100)
	p := open(t, cfg)
	defer p.Close()
	if err := p.Put(ctx, strings.Repeat("k", 1000), bytes.NewReader(nil), 0); !errors.Is(err, s3.ErrInvalidKey) {
		t.Errorf("Put of a key over the limit with the prefix = %v, want ErrInvalidKey", err)
	}
}

func TestMissingBucket(t *testing.T) {
	srv := server(t)
	cfg := srv.Config(uniq("missing"))
	cfg.CreateBucket = false
	_, err := s3.New(context.Background(), cfg)
	if !errors.Is(err, s3.ErrNoBucket) || s3.IsRetriable(err) {
		t.Fatalf("New with a missing bucket = %v, want ErrNoBucket, not retriable", err)
	}
	for _, want := range []string{cfg.Bucket, cfg.Endpoint, "create_bucket"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
	// With CreateBucket it is created, and a second New finds it.
	cfg.CreateBucket = true
	open(t, cfg).Close()
	cfg.CreateBucket = false
	s := open(t, cfg)
	defer s.Close()

	// The bucket vanishing under a running store is not "object not found".
	if err := os.RemoveAll(filepath.Join(srv.Dir(), cfg.Bucket)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ops := map[string]func() error{
		"Size":   func() error { _, err := s.Size(ctx, "x"); return err },
		"ReadAt": func() error { return s.ReadAt(ctx, "x", make([]byte, 1), 0) },
		"List":   func() error { _, err := s.List(ctx, ""); return err },
		"Put":    func() error { return s.Put(ctx, "x", bytes.NewReader([]byte("x")), 1) },
		"Delete": func() error { return s.Delete(ctx, "x") },
	}
	for name, op := range ops {
		if err := op(); !errors.Is(err, s3.ErrNoBucket) || errors.Is(err, objstore.ErrNotFound) || s3.IsRetriable(err) {
			t.Errorf("%s after the bucket vanished = %v, want ErrNoBucket only", name, err)
		}
	}
}

func TestBadCredentials(t *testing.T) {
	srv := server(t)
	cfg := srv.Config(uniq("creds"))
	open(t, cfg).Close()
	cfg.SecretKey = "wrong-secret"
	_, err := s3.New(context.Background(), cfg)
	if !errors.Is(err, s3.ErrAccessDenied) || s3.IsRetriable(err) {
		t.Fatalf("New with a wrong secret = %v, want ErrAccessDenied, not retriable", err)
	}
}

func TestUnreachable(t *testing.T) {
	// A port nobody listens on: connection refused, retriable.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := s3.DefaultConfig()
	cfg.Endpoint, cfg.Bucket, cfg.Region = addr, "sluice", "us-east-1"
	cfg.AccessKey, cfg.SecretKey = "a", "b"
	cfg.MaxRetries = 1
	_, err = s3.New(context.Background(), cfg)
	if !s3.IsRetriable(err) {
		t.Fatalf("New against a closed port = %v, want a retriable error", err)
	}
}

func TestListPagination(t *testing.T) {
	srv := server(t)
	s := open(t, srv.Config(uniq("pages")))
	defer s.Close()
	s3.SetListPageSize(s, 7)
	ctx := context.Background()
	var want []string
	for i := range 50 {
		// Inserted out of order, and with '.' < '/' < '0' around a level.
		key := fmt.Sprintf("p/%02d", (i*37)%50)
		if i%10 == 0 {
			key = fmt.Sprintf("p/%02d.x", (i*37)%50)
		}
		want = append(want, key)
		if err := s.Put(ctx, key, bytes.NewReader([]byte(key)), int64(len(key))); err != nil {
			t.Fatalf("Put: %v", err)
		}
	}
	slices.Sort(want)
	infos, err := s.List(ctx, "p/")
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	var got []string
	for _, in := range infos {
		got = append(got, in.Key)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("List over 7-key pages =\n%q\nwant\n%q", got, want)
	}
}

// TestPrefixIsolation: stores under different prefixes of one bucket, one
// a string prefix of the other, never see each other's objects.
func TestPrefixIsolation(t *testing.T) {
	srv := server(t)
	bucket := uniq("iso")
	root := open(t, srv.Config(bucket))
	defer root.Close()
	mk := func(prefix string) *s3.Store {
		c := srv.Config(bucket)
		c.Prefix = prefix
		return open(t, c)
	}
	a, a2 := mk("a"), mk("a2/")
	defer a.Close()
	defer a2.Close()
	ctx := context.Background()
	for _, s := range []*s3.Store{a, a2} {
		if err := s.Put(ctx, "k", bytes.NewReader([]byte("v")), 1); err != nil {
			t.Fatal(err)
		}
	}
	for name, s := range map[string]*s3.Store{"a": a, "a2": a2} {
		infos, err := s.List(ctx, "")
		if err != nil || len(infos) != 1 || infos[0].Key != "k" {
			t.Errorf("%s: List = %v, %v; want [k]", name, infos, err)
		}
	}
	infos, err := root.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, in := range infos {
		keys = append(keys, in.Key)
	}
	if !slices.Equal(keys, []string{"a/k", "a2/k"}) {
		t.Errorf("root List = %q, want [a/k a2/k]", keys)
	}
}

// recorder notes the Host of every request and sends it to 127.0.0.1, so
// names under a made-up domain need no DNS.
type recorder struct {
	port  string
	mu    sync.Mutex
	hosts map[string]bool
	tr    *http.Transport
}

func newRecorder(port string) *recorder {
	r := &recorder{port: port, hosts: map[string]bool{}}
	d := &net.Dialer{Timeout: 5 * time.Second}
	r.tr = &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return d.DialContext(ctx, network, net.JoinHostPort("127.0.0.1", r.port))
		},
	}
	return r
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	r.mu.Lock()
	r.hosts[req.URL.Host] = true
	r.mu.Unlock()
	return r.tr.RoundTrip(req)
}

func (r *recorder) seen() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for h := range r.hosts {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// TestAddressing runs a store in each addressing style against a server
// that accepts virtual-host requests under a made-up domain, and checks
// the Host every request carried. Virtual-host style needs bucket.domain to
// resolve; the test's transport dials 127.0.0.1 for every name, which is
// what a wildcard DNS record does in production.
func TestAddressing(t *testing.T) {
	const domain = "s3.sluice.test"
	srv := s3test.Start(t, s3test.WithVirtualDomain(domain))
	_, port, _ := net.SplitHostPort(srv.Addr())
	tests := []struct {
		addressing s3.Addressing
		endpoint   string
		wantHost   func(bucket string) string
	}{
		{s3.AddressingPath, "127.0.0.1:" + port, func(string) string { return "127.0.0.1:" + port }},
		{s3.AddressingPath, domain + ":" + port, func(string) string { return domain + ":" + port }},
		{s3.AddressingVirtualHost, domain + ":" + port, func(b string) string { return b + "." + domain + ":" + port }},
		// auto picks path style for anything but the big clouds.
		{s3.AddressingAuto, domain + ":" + port, func(string) string { return domain + ":" + port }},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("%s/%s", tc.addressing, tc.endpoint), func(t *testing.T) {
			bucket := uniq("addr")
			// Create the bucket path-style: creating one is a request on
			// the service, not on a bucket host.
			open(t, srv.Config(bucket)).Close()
			rec := newRecorder(port)
			cfg := srv.Config(bucket)
			cfg.Endpoint, cfg.Addressing, cfg.Transport, cfg.CreateBucket = tc.endpoint, tc.addressing, rec, false
			s := open(t, cfg)
			defer s.Close()
			ctx := context.Background()
			data := []byte("addressed")
			if err := s.Put(ctx, "obj", bytes.NewReader(data), int64(len(data))); err != nil {
				t.Fatalf("Put: %v", err)
			}
			p := make([]byte, len(data))
			if err := s.ReadAt(ctx, "obj", p, 0); err != nil || !bytes.Equal(p, data) {
				t.Fatalf("ReadAt = %q, %v", p, err)
			}
			if infos, err := s.List(ctx, ""); err != nil || len(infos) != 1 {
				t.Fatalf("List = %v, %v", infos, err)
			}
			if err := s.Delete(ctx, "obj"); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if got, want := rec.seen(), []string{tc.wantHost(bucket)}; !slices.Equal(got, want) {
				t.Fatalf("requests went to hosts %q, want %q", got, want)
			}
		})
	}
}

// wantRetriable runs every operation against an unavailable service and
// checks each fails retriably and never as "not found".
func wantRetriable(t *testing.T, s *s3.Store, stage string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ops := []struct {
		name string
		fn   func() error
	}{
		{"Put", func() error { return s.Put(ctx, "during", bytes.NewReader([]byte("x")), 1) }},
		{"PutStream", func() error { return s.Put(ctx, "during", io.LimitReader(zeros{}, 1000), 1000) }},
		{"ReadAt", func() error { return s.ReadAt(ctx, "before", make([]byte, 3), 0) }},
		{"Size", func() error { _, err := s.Size(ctx, "before"); return err }},
		{"List", func() error { _, err := s.List(ctx, ""); return err }},
		{"Delete", func() error { return s.Delete(ctx, "gone") }},
	}
	for _, op := range ops {
		err := op.fn()
		if err == nil || !s3.IsRetriable(err) || errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("%s: %s = %v, want a retriable error", stage, op.name, err)
		}
	}
	if ctx.Err() != nil {
		t.Errorf("%s: operations took over a minute to fail", stage)
	}
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

func wantWorking(t *testing.T, s *s3.Store, stage string) {
	t.Helper()
	ctx := context.Background()
	p := make([]byte, 3)
	if err := s.ReadAt(ctx, "before", p, 0); err != nil || string(p) != "old" {
		t.Fatalf("%s: ReadAt(before) = %q, %v", stage, p, err)
	}
	key := uniq("after")
	if err := s.Put(ctx, key, bytes.NewReader([]byte("new")), 3); err != nil {
		t.Fatalf("%s: Put: %v", stage, err)
	}
	if n, err := s.Size(ctx, key); err != nil || n != 3 {
		t.Fatalf("%s: Size = %d, %v", stage, n, err)
	}
}

// TestServerStopped: the service is killed under a running store. Every
// operation fails retriably (never as "not found", never hanging), and the
// same Store works again, with its data, once the service is back.
func TestServerStopped(t *testing.T) {
	srv := s3test.Start(t)
	s := open(t, srv.Config(uniq("stop")))
	defer s.Close()
	ctx := context.Background()
	if err := s.Put(ctx, "before", bytes.NewReader([]byte("old")), 3); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	wantRetriable(t, s, "stopped")
	srv.Restart()
	wantWorking(t, s, "restarted")
}

// TestServerHung: the service accepts connections but never answers
// (SIGSTOP). ResponseHeaderTimeout turns that into retriable errors.
func TestServerHung(t *testing.T) {
	srv := s3test.Start(t)
	cfg := srv.Config(uniq("hung"))
	cfg.ResponseHeaderTimeout = 300 * time.Millisecond
	cfg.MaxRetries = 1
	s := open(t, cfg)
	defer s.Close()
	ctx := context.Background()
	if err := s.Put(ctx, "before", bytes.NewReader([]byte("old")), 3); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	wantRetriable(t, s, "paused")
	srv.Resume()
	wantWorking(t, s, "resumed")
}

// TestOutageUnderLoad keeps writers and readers running while the service
// is down for a few seconds (SLUICE_LONG=1: the cluster issue's 10
// seconds): every error they see is retriable, and every Put that returned
// nil is readable afterwards.
func TestOutageUnderLoad(t *testing.T) {
	outage := 3 * time.Second
	if os.Getenv("SLUICE_LONG") == "1" {
		outage = 10 * time.Second
	}
	srv := s3test.Start(t)
	s := open(t, srv.Config(uniq("outage")))
	defer s.Close()
	ctx := context.Background()
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		acked   []string
		badErrs []error
		nerrs   atomic.Int64
	)
	for w := range 3 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("w%d/%06d", w, i)
				data := []byte(key)
				err := s.Put(ctx, key, bytes.NewReader(data), int64(len(data)))
				if err == nil {
					mu.Lock()
					acked = append(acked, key)
					mu.Unlock()
					err = s.ReadAt(ctx, key, make([]byte, len(data)), 0)
				}
				if err != nil {
					nerrs.Add(1)
					if !s3.IsRetriable(err) {
						mu.Lock()
						badErrs = append(badErrs, err)
						mu.Unlock()
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
		})
	}
	time.Sleep(500 * time.Millisecond)
	srv.Stop()
	time.Sleep(outage)
	srv.Restart()
	time.Sleep(time.Second)
	stop.Store(true)
	wg.Wait()
	for _, err := range badErrs {
		t.Errorf("non-retriable error during the outage: %v", err)
	}
	if nerrs.Load() == 0 {
		t.Errorf("no errors during a %v outage: was the service really down?", outage)
	}
	for _, key := range acked {
		p := make([]byte, len(key))
		if err := s.ReadAt(ctx, key, p, 0); err != nil || string(p) != key {
			t.Errorf("acknowledged %s: ReadAt = %q, %v", key, p, err)
		}
	}
	t.Logf("%d acknowledged puts, %d retriable errors over a %v outage", len(acked), nerrs.Load(), outage)
}

func TestClosed(t *testing.T) {
	srv := server(t)
	s := open(t, srv.Config(uniq("closed")))
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if err := s.Put(context.Background(), "k", bytes.NewReader(nil), 0); !errors.Is(err, s3.ErrClosed) {
		t.Fatalf("Put after Close = %v, want ErrClosed", err)
	}
}

// incompleteUploads lists the multipart uploads left in a bucket, through
// minio-go directly.
func incompleteUploads(t *testing.T, cfg s3.Config) []string {
	t.Helper()
	c, err := minio.New(cfg.Endpoint, &minio.Options{
		Creds:        credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""),
		Region:       cfg.Region,
		BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for u := range c.ListIncompleteUploads(context.Background(), cfg.Bucket, "", true) {
		if u.Err != nil {
			t.Fatalf("ListIncompleteUploads: %v", u.Err)
		}
		out = append(out, u.Key)
	}
	return out
}

type failAfter struct {
	r    io.Reader
	left int64
	err  error
}

func (f *failAfter) Read(p []byte) (int, error) {
	if f.left <= 0 {
		return 0, f.err
	}
	if int64(len(p)) > f.left {
		p = p[:f.left]
	}
	n, err := f.r.Read(p)
	f.left -= int64(n)
	return n, err
}

// TestPutFailures covers failed Puts the shared suite does not: a short
// source that is not seekable, and failures in the middle of a multipart
// upload, which must leave neither an object nor an incomplete upload.
func TestPutFailures(t *testing.T) {
	srv := server(t)
	cfg := srv.Config(uniq("putfail"))
	cfg.PartSize = 5 << 20
	s := open(t, cfg)
	defer s.Close()
	ctx := context.Background()
	notThere := func(key string) {
		t.Helper()
		if _, err := s.Size(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
			t.Errorf("Size(%s) after a failed Put = %v, want ErrNotFound", key, err)
		}
	}

	err := s.Put(ctx, "short", io.LimitReader(zeros{}, 10), 20)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("Put from a streamed source 10 bytes short = %v, want io.ErrUnexpectedEOF", err)
	}
	notThere("short")

	err = s.Put(ctx, "short-multipart", io.LimitReader(zeros{}, 7<<20), 12<<20)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("multipart Put from a short source = %v, want io.ErrUnexpectedEOF", err)
	}
	notThere("short-multipart")

	errSrc := errors.New("disk read failed")
	err = s.Put(ctx, "broken-multipart", &failAfter{r: zeros{}, left: 7 << 20, err: errSrc}, 12<<20)
	if !errors.Is(err, errSrc) {
		t.Errorf("multipart Put from a failing source = %v, want it to wrap the source error", err)
	}
	notThere("broken-multipart")

	cctx, cancel := context.WithCancel(ctx)
	err = s.Put(cctx, "canceled-multipart", &cancelAfter{r: zeros{}, left: 7 << 20, cancel: cancel}, 12<<20)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("multipart Put canceled after a part = %v, want context.Canceled", err)
	}
	notThere("canceled-multipart")

	if ups := incompleteUploads(t, cfg); len(ups) != 0 {
		t.Errorf("incomplete multipart uploads left behind: %q", ups)
	}
	// A long source is cut at size, as localfs does.
	if err := s.Put(ctx, "long", io.LimitReader(zeros{}, 100), 10); err != nil {
		t.Fatalf("Put from a longer source: %v", err)
	}
	if n, err := s.Size(ctx, "long"); err != nil || n != 10 {
		t.Errorf("Size(long) = %d, %v; want 10", n, err)
	}
}

type cancelAfter struct {
	r      io.Reader
	left   int64
	cancel func()
}

func (c *cancelAfter) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.cancel()
	}
	if int64(len(p)) > c.left && c.left > 0 {
		p = p[:c.left]
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	return n, err
}

// TestConnectionReuse checks that PUTs and GETs reuse connections: a new
// TCP connection per request costs a connect, a close and a TIME_WAIT
// socket each, and shows in the produce latency of cluster mode.
func TestConnectionReuse(t *testing.T) {
	srv := s3test.Start(t, s3test.WithKeepAlive())
	st, err := s3.New(context.Background(), srv.Config(uniq("reuse")))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	dials := s3.CountDials(st)
	ctx := context.Background()
	body := bytes.Repeat([]byte("x"), 64<<10)
	const workers, each = 8, 10
	var wg sync.WaitGroup
	errs := make(chan error, workers*each*2)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("reuse/%d/%d", w, i)
				if err := st.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
					errs <- err
					return
				}
				if err := st.ReadAt(ctx, key, make([]byte, 4096), 1000); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := dials.Load(); n > 2*workers {
		t.Fatalf("%d requests opened %d connections; want at most %d (connections reused)", workers*each*2, n, 2*workers)
	}
}

// payloadTransport records the payload hash header of every PUT and, when
// tamper is set, changes the first byte of each PUT body after signing, as
// a fault on the way to the service would.
type payloadTransport struct {
	tr     http.RoundTripper
	tamper bool
	mu     sync.Mutex
	hashes []string
}

func (p *payloadTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	object := strings.Contains(strings.Trim(req.URL.Path, "/"), "/") // not the bucket's creation
	if req.Method == http.MethodPut && object {
		p.mu.Lock()
		p.hashes = append(p.hashes, req.Header.Get("X-Amz-Content-Sha256"))
		p.mu.Unlock()
		if p.tamper && req.Body != nil {
			req = req.Clone(req.Context())
			req.Body = &flipFirst{r: req.Body}
		}
	}
	return p.tr.RoundTrip(req)
}

type flipFirst struct {
	r    io.ReadCloser
	done bool
}

func (f *flipFirst) Read(b []byte) (int, error) {
	n, err := f.r.Read(b)
	if n > 0 && !f.done {
		b[0] ^= 0xff
		f.done = true
	}
	return n, err
}

func (f *flipFirst) Close() error { return f.r.Close() }

// TestPutSignedPayload checks that a PUT of a seekable source carries the
// SHA-256 of its body in the signature (not a streaming, chunk-signed
// body), so the service checks the bytes it stores: a body changed on the
// way is refused, and nothing is stored under the key. Streamed sources
// keep minio-go's chunk signatures.
func TestPutSignedPayload(t *testing.T) {
	srv := server(t)
	pt := &payloadTransport{tr: http.DefaultTransport.(*http.Transport).Clone()}
	cfg := srv.Config(uniq("signed"))
	cfg.Transport = pt
	s := open(t, cfg)
	defer s.Close()
	ctx := context.Background()
	data := bytes.Repeat([]byte("flush object "), 700)
	if err := s.Put(ctx, "seekable", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put: %v", err)
	}
	got := make([]byte, len(data))
	if err := s.ReadAt(ctx, "seekable", got, 0); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("ReadAt after Put: equal=%v, %v", bytes.Equal(got, data), err)
	}
	if err := s.Put(ctx, "streamed", io.LimitReader(bytes.NewReader(data), int64(len(data))), int64(len(data))); err != nil {
		t.Fatalf("Put streamed: %v", err)
	}
	pt.mu.Lock()
	hashes := slices.Clone(pt.hashes)
	pt.mu.Unlock()
	if len(hashes) != 2 {
		t.Fatalf("saw %d PUTs, want 2: %q", len(hashes), hashes)
	}
	sum := sha256.Sum256(data)
	if want := hex.EncodeToString(sum[:]); hashes[0] != want {
		t.Errorf("seekable PUT signed payload %q, want its SHA-256 %s", hashes[0], want)
	}
	if !strings.HasPrefix(hashes[1], "STREAMING-") {
		t.Errorf("streamed PUT payload header %q, want a streaming signature", hashes[1])
	}

	pt.tamper = true
	err := s.Put(ctx, "tampered", bytes.NewReader(data), int64(len(data)))
	if err == nil {
		t.Fatal("Put with a body changed after signing succeeded; want the service to refuse it")
	}
	pt.tamper = false
	if _, err := s.Size(ctx, "tampered"); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("Size of the refused object = %v, want not found", err)
	}
}
