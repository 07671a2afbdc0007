package localfs

import (
	"fmt"
	"path/filepath"
	"strings"
)

// tempPrefix starts the name of every in-progress Put. Keys may not contain a
// segment with this prefix, so List and the crash cleanup in New can tell temp
// files from objects by name alone.
const tempPrefix = ".sluice-tmp-"

// maxKeyLen matches the S3 key limit so a key valid here is valid there.
const maxKeyLen = 1024

// validateKey reports whether key can be mapped to a path strictly inside the
// root without any cleaning: the path must map back to exactly this key.
func validateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > maxKeyLen:
		return fmt.Errorf("%w: key of %d bytes exceeds %d", ErrInvalidKey, len(key), maxKeyLen)
	case key[0] == '/':
		return fmt.Errorf("%w: %q is absolute", ErrInvalidKey, key)
	case strings.ContainsAny(key, "\x00\\"):
		return fmt.Errorf("%w: %q contains NUL or backslash", ErrInvalidKey, key)
	}
	for seg := range strings.SplitSeq(key, "/") {
		switch {
		case seg == "":
			return fmt.Errorf("%w: %q has an empty segment", ErrInvalidKey, key)
		case seg == "." || seg == "..":
			return fmt.Errorf("%w: %q has a %q segment", ErrInvalidKey, key, seg)
		case strings.HasPrefix(seg, tempPrefix):
			return fmt.Errorf("%w: %q uses the reserved prefix %q", ErrInvalidKey, key, tempPrefix)
		}
	}
	return nil
}

// path maps a validated key to its file.
func (s *Store) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

// keyOf maps a file under the root back to its key.
func (s *Store) keyOf(path string) (string, error) {
	rel, err := filepath.Rel(s.root, path)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}
