package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// writeFile times writing blocks MiB to a fresh file in dir in mode m,
// including the final fdatasync when m asks for one, and removes the file.
func writeFile(ctx context.Context, dir string, blocks int64, m diskMode) (time.Duration, error) {
	// O_DIRECT needs an aligned buffer; an anonymous mapping is page-aligned.
	buf, err := syscall.Mmap(-1, 0, directBlock, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return 0, fmt.Errorf("bench: mmap write buffer: %w", err)
	}
	defer func() { _ = syscall.Munmap(buf) }()
	_, _ = rand.NewChaCha8([32]byte{1}).Read(buf) // random, so no layer can compress it away

	flags := os.O_WRONLY | os.O_CREATE | os.O_EXCL
	if m.direct {
		flags |= syscall.O_DIRECT
	}
	if m.dsync {
		flags |= syscall.O_DSYNC
	}
	name := filepath.Join(dir, fmt.Sprintf(".sluice-diskbw-%d-%d", os.Getpid(), time.Now().UnixNano()))
	f, err := os.OpenFile(name, flags, 0o600)
	if err != nil {
		if m.direct && errors.Is(err, syscall.EINVAL) {
			return 0, fmt.Errorf("%w in %s: %v", ErrDirectIO, dir, err)
		}
		return 0, fmt.Errorf("bench: open %s: %w", name, err)
	}
	defer func() { _ = os.Remove(name) }()
	defer func() { _ = f.Close() }()

	start := time.Now()
	for range blocks {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		if _, err := f.Write(buf); err != nil {
			if m.direct && errors.Is(err, syscall.EINVAL) {
				return 0, fmt.Errorf("%w in %s: %v", ErrDirectIO, dir, err)
			}
			return 0, fmt.Errorf("bench: write %s: %w", name, err)
		}
	}
	if m.fdatasync {
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, fmt.Errorf("bench: fdatasync %s: %w", name, err)
		}
	}
	return time.Since(start), nil
}
