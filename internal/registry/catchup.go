package registry

import "context"

// CatchUp waits until the registry has applied every record of _schemas
// written before the call: a schema registered through another broker of
// the cluster a moment ago is known once it returns (the produce path's
// check calls it before refusing an id it does not know).
func (r *Registry) CatchUp(ctx context.Context) error {
	hw, err := r.store.Latest(ctx)
	if err != nil {
		return err
	}
	return r.waitApplied(ctx, hw)
}
