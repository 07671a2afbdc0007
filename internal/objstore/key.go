package objstore

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// ErrInvalidKey is wrapped by every backend's refusal of a key.
var ErrInvalidKey = errors.New("objstore: invalid key")

// MaxKeyLen is S3's limit on an object name, prefix included.
const MaxKeyLen = 1024

// ValidateKey applies the key rules every backend shares, so a key valid on
// one is valid on all: 1-1024 bytes of UTF-8, relative, '/'-separated
// segments that are neither empty, "." nor "..", no NUL or backslash.
// File-backed stores (localfs, and S3 services such as versitygw's posix
// backend) map keys to paths, which is why S3's looser rules are not used.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidKey, len(key), MaxKeyLen)
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
