//go:build linux

package wal

import (
	"os"
	"syscall"
)

// openDirect creates a segment file opened with O_DIRECT.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_DIRECT, 0o644)
}
