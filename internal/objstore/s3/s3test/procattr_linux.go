package s3test

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"time"
)

// procAttr kills the server with the test binary, even when the test
// process dies without running its cleanups.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits until pid is in the stopped state: SIGSTOP takes
// effect asynchronously, and a request sent in between would still be
// served. It gives up after a few seconds (the caller's test then sees
// whatever happens).
func waitStopped(pid int) {
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return
		}
		// The state follows the parenthesised command name.
		if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && (b[i+2] == 'T' || b[i+2] == 't') {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
