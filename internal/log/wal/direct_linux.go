//go:build linux

package wal

import (
	"io"
	"os"
	"syscall"
	"unsafe"
)

// openDirect creates a segment file opened with O_DIRECT.
func openDirect(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY|syscall.O_DIRECT, 0o644)
}

// pwritev writes bufs, in order, at offset off of f, in as few calls as
// the kernel takes: a group commit's pieces (blocks of several chunks and
// the staged last block) go to the device in one request.
func pwritev(f *os.File, bufs [][]byte, off int64) error {
	iov := make([]syscall.Iovec, 0, len(bufs))
	for _, b := range bufs {
		if len(b) > 0 {
			v := syscall.Iovec{Base: &b[0]}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	for len(iov) > 0 {
		var n uintptr
		var errno syscall.Errno
		if err := rc.Write(func(fd uintptr) bool {
			n, _, errno = syscall.Syscall6(syscall.SYS_PWRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)),
				uintptr(off), uintptr(off>>32), 0)
			return true
		}); err != nil {
			return err
		}
		switch {
		case errno == syscall.EINTR:
			continue
		case errno != 0:
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: errno}
		case n == 0:
			return &os.PathError{Op: "pwritev", Path: f.Name(), Err: io.ErrShortWrite}
		}
		off += int64(n)
		for n > 0 {
			if l := uintptr(iov[0].Len); n >= l {
				n -= l
				iov = iov[1:]
				continue
			}
			iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), n))
			iov[0].SetLen(int(uintptr(iov[0].Len) - n))
			n = 0
		}
	}
	return nil
}
