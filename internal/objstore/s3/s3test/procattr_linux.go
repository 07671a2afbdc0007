package s3test

import "syscall"

// procAttr kills the server with the test binary, even when the test
// process dies without running its cleanups.
func procAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
