//go:build !linux && !darwin

package wal

import "errors"

// freeBytes is not probed here: only a write that fails for want of space
// stops appends.
func freeBytes(string) (int64, error) {
	return 0, errors.New("wal: free space not probed on this platform")
}
