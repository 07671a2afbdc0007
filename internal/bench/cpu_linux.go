package bench

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// userHZ is the unit of the tick counts in /proc/PID/stat. The kernel
// reports them in USER_HZ, which is 100 on every Linux architecture Go
// supports, whatever the kernel's own HZ.
const userHZ = 100

// processCPU is utime+stime of pid from /proc/PID/stat, to 10 ms.
func processCPU(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("%w: %v", ErrNoProcessCPU, err)
	}
	return parseProcStat(b)
}

// parseProcStat reads utime and stime (fields 14 and 15) from a
// /proc/PID/stat line. The command name (field 2) is in parentheses and may
// itself hold spaces and parentheses, so fields are counted from the last ')'.
func parseProcStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("%w: malformed stat line", ErrNoProcessCPU)
	}
	f := bytes.Fields(b[i+1:]) // f[0] is field 3, the state
	if len(f) < 13 {
		return 0, fmt.Errorf("%w: stat line has %d fields", ErrNoProcessCPU, len(f)+2)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(string(s), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("%w: stat field %q: %v", ErrNoProcessCPU, s, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// selfCPU is the driver process's user+system time, to the microsecond.
func selfCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("%w: getrusage: %v", ErrNoProcessCPU, err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
