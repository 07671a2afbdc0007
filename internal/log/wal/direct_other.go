//go:build !linux

package wal

import (
	"errors"
	"os"
)

// openDirect is not available here: segments are written through the
// page cache.
func openDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }

// pwritev writes bufs, in order, at offset off of f.
func pwritev(f *os.File, bufs [][]byte, off int64) error {
	for _, b := range bufs {
		if _, err := f.WriteAt(b, off); err != nil {
			return err
		}
		off += int64(len(b))
	}
	return nil
}
