package localfs

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// tempPrefix starts the name of every in-progress Put. Keys may not contain a
// segment with this prefix, so List and the crash cleanup in New can tell temp
// files from objects by name alone.
const tempPrefix = ".sluice-tmp-"

// validateKey applies the shared key rules (objstore.ValidateKey) plus
// localfs's own: no segment may start with the temp-file prefix.
func validateKey(key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	for seg := range strings.SplitSeq(key, "/") {
		if strings.HasPrefix(seg, tempPrefix) {
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
