package log

// Fence compares in cluster mode. SharedConfig.Fence gives, for every
// partition this broker leads, the same compare: its session's fence key
// at the version it knows (docs/cluster-keys.md, "Fencing"). A Txn that
// registers data for many partitions therefore carries one compare, not
// two per partition, and an object or a snapshot Txn can cover thousands
// of partitions. The price: a claim of any partition this broker gave up
// bumps the key, so a Txn in flight then fails although its own
// partitions are still led. Such a conflict is told apart from a lost
// leadership by asking Fence again after SharedConfig.RefreshFence: a
// partition still led at the same epoch is written again under the new
// version; one that is not is left out.

import (
	"context"
	"fmt"

	"github.com/sluice-mq/sluice/internal/meta"
)

// maxFenceRetries bounds the attempts of a fenced Txn whose conflicts are
// the fence moving (claims of partitions this broker gave up, each a few
// milliseconds apart at most while a broker takes many over).
const maxFenceRetries = 20

// compareSet is the compares of one Txn, each key once.
type compareSet struct {
	vers map[string]int64
	list []meta.Compare
}

// add adds cmps; false (and nothing added) if one of them wants another
// version of a key already in the set, or the set would pass
// meta.MaxTxnOps.
func (s *compareSet) add(cmps []meta.Compare) bool {
	if s.vers == nil {
		s.vers = map[string]int64{}
	}
	n := len(s.list)
	var fresh map[string]int64
	for _, c := range cmps {
		v, ok := s.vers[c.Key]
		if !ok {
			v, ok = fresh[c.Key]
		}
		if ok && v != c.Version {
			return false
		}
		if !ok {
			if fresh == nil {
				fresh = map[string]int64{}
			}
			fresh[c.Key] = c.Version
			n++
		}
	}
	if n > meta.MaxTxnOps {
		return false
	}
	for _, c := range cmps {
		if _, ok := s.vers[c.Key]; !ok {
			s.vers[c.Key] = c.Version
			s.list = append(s.list, c)
		}
	}
	return true
}

// fenceOf returns the fence compares of p if it is still led at epoch.
func (e *Engine) fenceOf(p *Partition, epoch int32) ([]meta.Compare, bool) {
	c, ep, ok := e.cfg.Shared.Fence(p.t.name, p.id)
	return c, ok && ep == epoch
}

// fenceMoved is called after a fenced Txn failed its compares: it lets
// the cluster layer learn the fence's current version and reports whether
// it is worth trying again (the fence moved; the caller asks Fence again,
// which leaves out the partitions no longer led).
func (e *Engine) fenceMoved(ctx context.Context, conflict error) bool {
	if e.cfg.Shared.RefreshFence == nil {
		return false
	}
	if err := e.cfg.Shared.RefreshFence(ctx, conflict); err != nil {
		e.log.Debug("refreshing the fence after a conflict failed", "err", err)
		return false
	}
	return true
}

// txnFenced runs ops under the fence of p at epoch plus extra compares,
// merged with other partitions' concurrent ones (a burst of Acquires
// writes each partition's epoch history). A conflict while p is still led
// at epoch is retried under the fence's new version; the conflict is
// returned once p is not (or extra fails).
func (e *Engine) txnFenced(ctx context.Context, p *Partition, epoch int32, extra []meta.Compare, ops ...meta.Op) error {
	for attempt := 0; ; attempt++ {
		cmps, ok := e.fenceOf(p, epoch)
		if !ok {
			return fmt.Errorf("%w: %s-%d is not led at epoch %d any more", meta.ErrConflict, p.t.name, p.id, epoch)
		}
		var set compareSet
		if !set.add(cmps) || !set.add(extra) {
			return fmt.Errorf("log: %s-%d: %d compares do not fit one Txn", p.t.name, p.id, len(cmps)+len(extra))
		}
		err := e.metaBatch.Txn(ctx, set.list, ops...)
		if !isConflict(err) || attempt == maxFenceRetries || !e.fenceMoved(ctx, err) {
			return err
		}
		if now, _ := e.fenceOf(p, epoch); sameCompares(now, cmps) {
			return err // not the fence: an extra compare failed
		}
	}
}

func sameCompares(a, b []meta.Compare) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
