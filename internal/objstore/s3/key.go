package s3

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// maxKeyLen is S3's limit on an object name, prefix included.
const maxKeyLen = 1024

// validateKey applies localfs's rules (docs/backends.md) minus its temp-file
// prefix, so a key valid on one backend is valid on the other. S3 itself
// would take "a//b" or "../x", but file-backed services such as versitygw's
// posix backend map names to paths and refuse or mangle them.
func validateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > maxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidKey, len(key), maxKeyLen)
	case key[0] == '/':
		return fmt.Errorf("%w: %q is absolute", ErrInvalidKey, key)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: %q is not UTF-8", ErrInvalidKey, key)
	case strings.ContainsAny(key, "\x00\\"):
		return fmt.Errorf("%w: %q contains NUL or backslash", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch seg {
		case "":
			return fmt.Errorf("%w: %q has an empty segment", ErrInvalidKey, key)
		case ".", "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, key, seg)
		}
	}
	return nil
}
