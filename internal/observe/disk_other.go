//go:build !unix

package observe

// diskSpace is not measured here.
func diskSpace(string) (size, used, free int64, ok bool) { return 0, 0, 0, false }
