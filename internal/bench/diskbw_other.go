//go:build !linux

package bench

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

func writeFile(context.Context, string, int64, diskMode) (time.Duration, error) {
	return 0, fmt.Errorf("%w on %s", ErrDirectIO, runtime.GOOS)
}
