package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/sluice-mq/sluice/internal/meta"
)

var bg = context.Background()

func openT(t *testing.T, path string, opts ...Option) *Store {
	t.Helper()
	s, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func TestOpenCreatesDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "data", "meta", "meta.db")
	s := openT(t, path)
	if err := s.Txn(bg, nil, meta.Put("k", []byte("v"))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

// TestLockedInProcess: a second Open of the same file (a separate file
// description, as another process would have) fails after the lock timeout
// with a message an operator understands.
func TestLockedInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	openT(t, path)
	_, err := Open(path, WithLockTimeout(100*time.Millisecond))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "data dir is in use by another sluice process") || !strings.Contains(err.Error(), path) {
		t.Fatalf("error %q should name the path and say the data dir is in use", err)
	}
}

// TestLockedByOtherProcess holds the file open in a real child process.
func TestLockedByOtherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperHoldLock$")
	cmd.Env = append(os.Environ(), "SLUICE_EMBEDDED_HOLD="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	// The child prints "locked" once it holds the file.
	buf := make([]byte, 6)
	if _, err := stdout.Read(buf); err != nil || string(buf) != "locked" {
		t.Fatalf("helper did not report the lock: %q, %v", buf, err)
	}
	if _, err := Open(path, WithLockTimeout(200*time.Millisecond)); !errors.Is(err, ErrLocked) {
		t.Fatalf("Open while another process holds the file = %v, want ErrLocked", err)
	}
	// Once that process dies the lock is released with it.
	cmd.Process.Kill()
	cmd.Wait()
	s := openT(t, path)
	if _, err := s.Get(bg, "held"); err != nil {
		t.Fatalf("data written by the dead process: %v", err)
	}
}

func TestHelperHoldLock(t *testing.T) {
	path := os.Getenv("SLUICE_EMBEDDED_HOLD")
	if path == "" {
		t.Skip("helper process for TestLockedByOtherProcess")
	}
	s, err := Open(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if err := s.Txn(bg, nil, meta.Put("held", nil)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	fmt.Print("locked")
	time.Sleep(time.Minute) // until killed
	os.Exit(0)
}

// TestMoreThanMaxTxnOps: the embedded store does not cap transactions;
// MaxTxnOps is a guideline for code that must also run on etcd.
func TestMoreThanMaxTxnOps(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "meta.db"))
	n := 10 * meta.MaxTxnOps
	ops := make([]meta.Op, n)
	for i := range ops {
		ops[i] = meta.Put(fmt.Sprintf("k/%05d", i), []byte("v"))
	}
	if err := s.Txn(bg, nil, ops...); err != nil {
		t.Fatalf("Txn of %d ops: %v", n, err)
	}
	kvs, err := s.List(bg, "k/")
	if err != nil || len(kvs) != n {
		t.Fatalf("List = %d keys, %v; want %d", len(kvs), err, n)
	}
	if err := s.Txn(bg, nil, meta.DeletePrefix("k/")); err != nil {
		t.Fatal(err)
	}
	if kvs, _ := s.List(bg, ""); len(kvs) != 0 {
		t.Fatalf("%d keys left after DeletePrefix", len(kvs))
	}
}

func TestInvalidTxnSentinels(t *testing.T) {
	s := openT(t, filepath.Join(t.TempDir(), "meta.db"))
	tests := []struct {
		name string
		cmps []meta.Compare
		ops  []meta.Op
		want error
	}{
		{"dup put", nil, []meta.Op{meta.Put("a", nil), meta.Put("a", nil)}, ErrInvalidTxn},
		{"empty key", nil, []meta.Op{meta.Put("", nil)}, ErrInvalidKey},
		{"huge key", nil, []meta.Op{meta.Put(strings.Repeat("k", bolt.MaxKeySize+1), nil)}, ErrInvalidKey},
		{"empty compare", []meta.Compare{{}}, nil, ErrInvalidKey},
	}
	for _, tc := range tests {
		if err := s.Txn(bg, tc.cmps, tc.ops...); !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidTxn) {
			t.Errorf("%s: Txn = %v, want %v within ErrInvalidTxn", tc.name, err, tc.want)
		}
	}
	if _, err := s.Get(bg, ""); !errors.Is(err, ErrInvalidKey) {
		t.Errorf("Get(\"\") = %v, want ErrInvalidKey", err)
	}
}

func TestClosed(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "meta.db"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(bg, "k"); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
	if _, err := s.List(bg, ""); !errors.Is(err, ErrClosed) {
		t.Errorf("List after Close = %v, want ErrClosed", err)
	}
	if err := s.Txn(bg, nil, meta.Put("k", nil)); !errors.Is(err, ErrClosed) {
		t.Errorf("Txn after Close = %v, want ErrClosed", err)
	}
}

// TestOnDiskFormat pins the layout docs/backends.md describes, so a change to
// it is a deliberate format bump.
func TestOnDiskFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if err := s.Txn(bg, nil, meta.Put("topics/t", []byte("cfg"))); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()

	db, err := bolt.Open(path, 0o600, &bolt.Options{ReadOnly: true, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *bolt.Tx) error {
		if v := tx.Bucket([]byte("info")).Get([]byte("format")); binary.BigEndian.Uint64(v) != 1 {
			return fmt.Errorf("format = %x, want 1", v)
		}
		v := tx.Bucket([]byte("kv")).Get([]byte("topics/t"))
		if want := "\x00\x00\x00\x00\x00\x00\x00\x03cfg"; string(v) != want {
			return fmt.Errorf("stored value %q, want %q", v, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRefusesUnknownFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := tx.CreateBucket([]byte("info"))
		if err != nil {
			return err
		}
		return b.Put([]byte("format"), binary.BigEndian.AppendUint64(nil, 99))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path); err == nil || !strings.Contains(err.Error(), "unsupported format") {
		t.Fatalf("Open of a format-99 file = %v, want an unsupported-format error", err)
	}
}

func TestCorruptValue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket([]byte("kv")).Put([]byte("bad"), []byte("abc")) })
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	s = openT(t, path)
	if _, err := s.Get(bg, "bad"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Get = %v, want ErrCorrupt", err)
	}
	if _, err := s.List(bg, ""); !errors.Is(err, ErrCorrupt) {
		t.Errorf("List = %v, want ErrCorrupt", err)
	}
	if err := s.Txn(bg, []meta.Compare{{Key: "bad", Version: 1}}); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Txn = %v, want ErrCorrupt", err)
	}
}
