//go:build !linux

package bench

import (
	"fmt"
	"runtime"
	"time"
)

// On other systems the report carries no CPU figures.

func processCPU(int) (time.Duration, error) {
	return 0, fmt.Errorf("%w on %s", ErrNoProcessCPU, runtime.GOOS)
}

func selfCPU() (time.Duration, error) {
	return 0, fmt.Errorf("%w on %s", ErrNoProcessCPU, runtime.GOOS)
}
