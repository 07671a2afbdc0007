//go:build unix

package observe

import "syscall"

// diskSpace returns the size, the space used and the space available to
// this process of dir's file system.
func diskSpace(dir string) (size, used, free int64, ok bool) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, 0, 0, false
	}
	bs := int64(st.Bsize)
	return int64(st.Blocks) * bs, int64(st.Blocks-st.Bfree) * bs, int64(st.Bavail) * bs, true
}
