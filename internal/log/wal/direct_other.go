//go:build !linux

package wal

import (
	"errors"
	"os"
)

// openDirect is not available here: segments are written through the
// page cache.
func openDirect(string) (*os.File, error) { return nil, errors.ErrUnsupported }
