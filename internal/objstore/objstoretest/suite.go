package objstoretest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"testing"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// Option configures Run.
type Option func(*config)

type config struct {
	reopen func(t *testing.T, old objstore.Storage) objstore.Storage
}

// WithReopen enables the persistence test. reopen must close old and return a
// new Storage over the same data (same directory, bucket or prefix).
func WithReopen(reopen func(t *testing.T, old objstore.Storage) objstore.Storage) Option {
	return func(c *config) { c.reopen = reopen }
}

// env is what each suite test gets: a fresh store and, if the backend
// supports it, a way to reopen it.
type env struct {
	s      objstore.Storage
	reopen func(t *testing.T, old objstore.Storage) objstore.Storage
}

// Run runs the shared suite. newStore must return a fresh, empty store; the
// suite closes it when the subtest ends.
func Run(t *testing.T, newStore func(t *testing.T) objstore.Storage, opts ...Option) {
	var cfg config
	for _, o := range opts {
		o(&cfg)
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"PutGet", testPutGet},
		{"Missing", testMissing},
		{"EmptyObject", testEmptyObject},
		{"ReadAtRanges", testReadAtRanges},
		{"Overwrite", testOverwrite},
		{"OverwriteAtomic", testOverwriteAtomic},
		{"PutShortSource", testPutShortSource},
		{"PutSourceError", testPutSourceError},
		{"Delete", testDelete},
		{"ListPrefix", testListPrefix},
		{"NestedKeys", testNestedKeys},
		{"Concurrent", testConcurrent},
		{"LargeStreamed", testLarge},
		{"ContextCanceled", testContextCanceled},
		{"ContextCanceledMidPut", testContextCanceledMidPut},
		{"Reopen", testReopen},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{s: newStore(t), reopen: cfg.reopen}
			t.Cleanup(func() {
				if err := e.s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			tc.fn(t, e)
		})
	}
}

func put(t *testing.T, s objstore.Storage, key string, data []byte) {
	t.Helper()
	if err := s.Put(context.Background(), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", key, len(data), err)
	}
}

// get reads the whole object via Size and one ReadAt.
func get(t *testing.T, s objstore.Storage, key string) []byte {
	t.Helper()
	ctx := context.Background()
	n, err := s.Size(ctx, key)
	if err != nil {
		t.Fatalf("Size(%q): %v", key, err)
	}
	p := make([]byte, n)
	if err := s.ReadAt(ctx, key, p, 0); err != nil {
		t.Fatalf("ReadAt(%q, 0, %d): %v", key, n, err)
	}
	return p
}

func wantNotFound(t *testing.T, s objstore.Storage, key string) {
	t.Helper()
	ctx := context.Background()
	if _, err := s.Size(ctx, key); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("Size(%q) = %v, want ErrNotFound", key, err)
	}
	if err := s.ReadAt(ctx, key, make([]byte, 1), 0); !errors.Is(err, objstore.ErrNotFound) {
		t.Errorf("ReadAt(%q) = %v, want ErrNotFound", key, err)
	}
}

func keys(t *testing.T, s objstore.Storage, prefix string) []string {
	t.Helper()
	infos, err := s.List(context.Background(), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	out := make([]string, 0, len(infos))
	for _, in := range infos {
		out = append(out, in.Key)
	}
	return out
}

// pattern returns n deterministic bytes that differ per seed and offset, so a
// read from the wrong place or object is caught.
func pattern(seed byte, n int) []byte {
	p := make([]byte, n)
	fillPattern(p, seed, 0)
	return p
}

func fillPattern(p []byte, seed byte, off int64) {
	for i := range p {
		x := uint64(off+int64(i)) * 0x9E3779B97F4A7C15
		p[i] = byte(x>>56) ^ seed
	}
}

func testPutGet(t *testing.T, e *env) {
	data := pattern(1, 10_000)
	put(t, e.s, "obj", data)
	if got := get(t, e.s, "obj"); !bytes.Equal(got, data) {
		t.Fatalf("content mismatch after Put")
	}
	n, err := e.s.Size(context.Background(), "obj")
	if err != nil || n != int64(len(data)) {
		t.Fatalf("Size = %d, %v; want %d", n, err, len(data))
	}
	// Callers may reuse their buffer after Put returns.
	data[0] ^= 0xff
	if got := get(t, e.s, "obj"); got[0] == data[0] {
		t.Fatalf("store aliases the caller's buffer")
	}
}

func testMissing(t *testing.T, e *env) {
	wantNotFound(t, e.s, "never/written")
	put(t, e.s, "present", []byte("x"))
	wantNotFound(t, e.s, "presen")
	wantNotFound(t, e.s, "present2")
}

func testEmptyObject(t *testing.T, e *env) {
	ctx := context.Background()
	put(t, e.s, "empty", nil)
	if n, err := e.s.Size(ctx, "empty"); err != nil || n != 0 {
		t.Fatalf("Size = %d, %v; want 0, nil", n, err)
	}
	if err := e.s.ReadAt(ctx, "empty", nil, 0); err != nil {
		t.Errorf("ReadAt(empty, len 0) = %v, want nil", err)
	}
	if err := e.s.ReadAt(ctx, "empty", make([]byte, 1), 0); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("ReadAt(empty, len 1) = %v, want io.ErrUnexpectedEOF", err)
	}
	if got := keys(t, e.s, ""); !slices.Equal(got, []string{"empty"}) {
		t.Errorf("List = %q, want [empty]", got)
	}
}

func testReadAtRanges(t *testing.T, e *env) {
	const size = 1000
	data := pattern(2, size)
	put(t, e.s, "r", data)
	tests := []struct {
		off, n int64
		want   error // nil, io.ErrUnexpectedEOF
	}{
		{0, 0, nil},
		{0, size, nil},
		{0, 1, nil},
		{999, 1, nil},
		{500, 100, nil},
		{size, 0, nil},
		{999, 2, io.ErrUnexpectedEOF},
		{0, size + 1, io.ErrUnexpectedEOF},
		{size, 1, io.ErrUnexpectedEOF},
		{2 * size, 10, io.ErrUnexpectedEOF},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("off=%d,n=%d", tc.off, tc.n), func(t *testing.T) {
			p := make([]byte, tc.n)
			err := e.s.ReadAt(context.Background(), "r", p, tc.off)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("ReadAt = %v, want %v", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadAt = %v", err)
			}
			if !bytes.Equal(p, data[tc.off:tc.off+tc.n]) {
				t.Fatalf("ReadAt returned wrong bytes")
			}
		})
	}
	t.Run("negative offset", func(t *testing.T) {
		err := e.s.ReadAt(context.Background(), "r", make([]byte, 1), -1)
		if err == nil || errors.Is(err, objstore.ErrNotFound) {
			t.Fatalf("ReadAt(off=-1) = %v, want an argument error", err)
		}
	})
}

func testOverwrite(t *testing.T, e *env) {
	put(t, e.s, "k", pattern(1, 5000))
	v2 := pattern(2, 300)
	put(t, e.s, "k", v2)
	if got := get(t, e.s, "k"); !bytes.Equal(got, v2) {
		t.Fatalf("after overwrite got %d bytes, want the 300-byte second version", len(got))
	}
	if got := keys(t, e.s, ""); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("List = %q, want [k]", got)
	}
}

// testOverwriteAtomic races writers of two uniform versions against readers;
// a reader must always see one whole version.
func testOverwriteAtomic(t *testing.T, e *env) {
	const size = 256 << 10
	a, b := bytes.Repeat([]byte{'a'}, size), bytes.Repeat([]byte{'b'}, size)
	put(t, e.s, "atomic", a)
	ctx := context.Background()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errc := make(chan error, 8)
	for w := range 2 {
		wg.Go(func() {
			v := a
			if w == 1 {
				v = b
			}
			for range 20 {
				if err := e.s.Put(ctx, "atomic", bytes.NewReader(v), size); err != nil {
					errc <- fmt.Errorf("Put: %w", err)
					return
				}
			}
		})
	}
	var rg sync.WaitGroup
	for range 4 {
		rg.Go(func() {
			p := make([]byte, size)
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := e.s.ReadAt(ctx, "atomic", p, 0); err != nil {
					errc <- fmt.Errorf("ReadAt: %w", err)
					return
				}
				if !bytes.Equal(p, a) && !bytes.Equal(p, b) {
					errc <- errors.New("reader saw a mix of two versions")
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
}

// testPutShortSource: a source that ends before size must fail the Put and
// leave any previous version intact.
func testPutShortSource(t *testing.T, e *env) {
	ctx := context.Background()
	err := e.s.Put(ctx, "short", bytes.NewReader(make([]byte, 10)), 20)
	if err == nil {
		t.Fatalf("Put with a 10-byte source and size 20 succeeded")
	}
	wantNotFound(t, e.s, "short")

	old := pattern(3, 64)
	put(t, e.s, "short", old)
	if err := e.s.Put(ctx, "short", bytes.NewReader(make([]byte, 10)), 20); err == nil {
		t.Fatalf("Put with a short source succeeded")
	}
	if got := get(t, e.s, "short"); !bytes.Equal(got, old) {
		t.Fatalf("failed Put damaged the previous version")
	}
	if got := keys(t, e.s, ""); !slices.Equal(got, []string{"short"}) {
		t.Fatalf("List = %q, want [short]", got)
	}
}

var errSource = errors.New("objstoretest: source failed")

type failingReader struct {
	left int
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, r.err
	}
	n := min(len(p), r.left)
	clear(p[:n])
	r.left -= n
	return n, nil
}

func testPutSourceError(t *testing.T, e *env) {
	err := e.s.Put(context.Background(), "src", &failingReader{left: 1000, err: errSource}, 1<<20)
	if !errors.Is(err, errSource) {
		t.Fatalf("Put = %v, want it to wrap the source's error", err)
	}
	wantNotFound(t, e.s, "src")
	if got := keys(t, e.s, ""); len(got) != 0 {
		t.Fatalf("List after failed Put = %q, want empty", got)
	}
}

func testDelete(t *testing.T, e *env) {
	ctx := context.Background()
	put(t, e.s, "d/1", []byte("one"))
	put(t, e.s, "d/2", []byte("two"))
	for range 2 { // the second round checks idempotence
		if err := e.s.Delete(ctx, "d/1"); err != nil {
			t.Fatalf("Delete: %v", err)
		}
		wantNotFound(t, e.s, "d/1")
	}
	if err := e.s.Delete(ctx, "never/existed"); err != nil {
		t.Fatalf("Delete of a missing key = %v, want nil", err)
	}
	if got := keys(t, e.s, ""); !slices.Equal(got, []string{"d/2"}) {
		t.Fatalf("List = %q, want [d/2]", got)
	}
	put(t, e.s, "d/1", []byte("again"))
	if got := get(t, e.s, "d/1"); string(got) != "again" {
		t.Fatalf("re-Put after Delete read %q", got)
	}
}

func testListPrefix(t *testing.T, e *env) {
	all := []string{"a.b", "a/b", "a/c/d", "a0", "ab", "b/x", "data/001", "data/002", "data/010/x", "z"}
	for i, k := range all {
		put(t, e.s, k, pattern(byte(i), i+1))
	}
	tests := []struct {
		prefix string
		want   []string
	}{
		{"", all},
		{"a", []string{"a.b", "a/b", "a/c/d", "a0", "ab"}},
		{"a/", []string{"a/b", "a/c/d"}},
		{"a/c", []string{"a/c/d"}},
		{"a/c/d", []string{"a/c/d"}},
		{"a/c/d/", nil},
		{"a0", []string{"a0"}},
		{"data/00", []string{"data/001", "data/002"}},
		{"data/0", []string{"data/001", "data/002", "data/010/x"}},
		{"data/", []string{"data/001", "data/002", "data/010/x"}},
		{"nope", nil},
		{"nope/", nil},
		{"z", []string{"z"}},
	}
	for _, tc := range tests {
		t.Run(fmt.Sprintf("prefix=%q", tc.prefix), func(t *testing.T) {
			infos, err := e.s.List(context.Background(), tc.prefix)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var got []string
			for _, in := range infos {
				got = append(got, in.Key)
				if want := int64(slices.Index(all, in.Key) + 1); in.Size != want {
					t.Errorf("%s: Size = %d, want %d", in.Key, in.Size, want)
				}
				if in.ModTime.IsZero() {
					t.Errorf("%s: zero ModTime", in.Key)
				}
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("List(%q) = %q, want %q", tc.prefix, got, tc.want)
			}
		})
	}
}

func testNestedKeys(t *testing.T, e *env) {
	ctx := context.Background()
	deep := "topics/t-1/partition=3/00000000000000000042.obj"
	data := pattern(4, 4096)
	put(t, e.s, deep, data)
	if got := get(t, e.s, deep); !bytes.Equal(got, data) {
		t.Fatalf("content mismatch")
	}
	if got := keys(t, e.s, "topics/"); !slices.Equal(got, []string{deep}) {
		t.Fatalf("List = %q", got)
	}
	wantNotFound(t, e.s, "topics/t-1")
	if err := e.s.Delete(ctx, deep); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if got := keys(t, e.s, ""); len(got) != 0 {
		t.Fatalf("List after Delete = %q, want empty", got)
	}
}

func testConcurrent(t *testing.T, e *env) {
	const workers, perWorker = 16, 20
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range perWorker {
				key := fmt.Sprintf("c/%02d/%03d", w, i)
				data := pattern(byte(w*perWorker+i), 1000+i)
				if err := e.s.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
					errc <- fmt.Errorf("Put(%s): %w", key, err)
					return
				}
				p := make([]byte, len(data))
				if err := e.s.ReadAt(ctx, key, p, 0); err != nil {
					errc <- fmt.Errorf("ReadAt(%s): %w", key, err)
					return
				}
				if !bytes.Equal(p, data) {
					errc <- fmt.Errorf("%s: content mismatch", key)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if got := keys(t, e.s, "c/"); len(got) != workers*perWorker {
		t.Fatalf("List found %d objects, want %d", len(got), workers*perWorker)
	}
}

// patternReader streams pattern bytes without holding the object in memory
// and hides every optional interface, as a network body would.
type patternReader struct {
	seed      byte
	off, size int64
	onRead    func(off int64)
}

func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	if r.onRead != nil {
		r.onRead(r.off)
	}
	n := int(min(int64(len(p)), r.size-r.off, 64<<10))
	fillPattern(p[:n], r.seed, r.off)
	r.off += int64(n)
	return n, nil
}

func testLarge(t *testing.T, e *env) {
	const size = 20 << 20
	ctx := context.Background()
	if err := e.s.Put(ctx, "large", &patternReader{seed: 9, size: size}, size); err != nil {
		t.Fatalf("Put: %v", err)
	}
	if n, err := e.s.Size(ctx, "large"); err != nil || n != size {
		t.Fatalf("Size = %d, %v; want %d", n, err, size)
	}
	const chunk = 1 << 20
	got, want := make([]byte, chunk), make([]byte, chunk)
	for off := int64(0); off < size; off += chunk {
		if err := e.s.ReadAt(ctx, "large", got, off); err != nil {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
		fillPattern(want, 9, off)
		if !bytes.Equal(got, want) {
			t.Fatalf("content mismatch in chunk at %d", off)
		}
	}
	// A read straddling a chunk boundary and one ending exactly at the end.
	for _, off := range []int64{chunk - 100, size - 4096} {
		p, w := make([]byte, 4096), make([]byte, 4096)
		if err := e.s.ReadAt(ctx, "large", p, off); err != nil {
			t.Fatalf("ReadAt(%d): %v", off, err)
		}
		fillPattern(w, 9, off)
		if !bytes.Equal(p, w) {
			t.Fatalf("content mismatch at %d", off)
		}
	}
}

func testContextCanceled(t *testing.T, e *env) {
	put(t, e.s, "exists", []byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ops := []struct {
		name string
		fn   func() error
	}{
		{"Put", func() error { return e.s.Put(ctx, "new", bytes.NewReader([]byte("y")), 1) }},
		{"ReadAt", func() error { return e.s.ReadAt(ctx, "exists", make([]byte, 1), 0) }},
		{"Size", func() error { _, err := e.s.Size(ctx, "exists"); return err }},
		{"List", func() error { _, err := e.s.List(ctx, ""); return err }},
		{"Delete", func() error { return e.s.Delete(ctx, "exists") }},
	}
	for _, op := range ops {
		if err := op.fn(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a canceled context = %v, want context.Canceled", op.name, err)
		}
	}
	wantNotFound(t, e.s, "new")
}

func testContextCanceledMidPut(t *testing.T, e *env) {
	const size = 8 << 20
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &patternReader{seed: 5, size: size, onRead: func(off int64) {
		if off >= 1<<20 {
			cancel()
		}
	}}
	if err := e.s.Put(ctx, "cancel", r, size); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put canceled mid-stream = %v, want context.Canceled", err)
	}
	wantNotFound(t, e.s, "cancel")
	if got := keys(t, e.s, ""); len(got) != 0 {
		t.Fatalf("List after canceled Put = %q, want empty", got)
	}
}

func testReopen(t *testing.T, e *env) {
	if e.reopen == nil {
		t.Skip("backend gave no reopen function (objstoretest.WithReopen)")
	}
	ctx := context.Background()
	objs := map[string][]byte{"p/1": pattern(1, 100), "p/2": pattern(2, 70_000), "q": nil}
	for k, v := range objs {
		put(t, e.s, k, v)
	}
	if err := e.s.Delete(ctx, "p/1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	e.s = e.reopen(t, e.s)
	if got := keys(t, e.s, ""); !slices.Equal(got, []string{"p/2", "q"}) {
		t.Fatalf("List after reopen = %q, want [p/2 q]", got)
	}
	if got := get(t, e.s, "p/2"); !bytes.Equal(got, objs["p/2"]) {
		t.Fatalf("p/2 changed across reopen")
	}
	wantNotFound(t, e.s, "p/1")
}
