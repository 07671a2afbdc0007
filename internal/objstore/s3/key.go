package s3

import (
	"fmt"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// validateKey applies the rules shared by every backend (see
// objstore.ValidateKey), so a key valid on localfs is valid here.
func validateKey(key string) error {
	if err := objstore.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return nil
}
