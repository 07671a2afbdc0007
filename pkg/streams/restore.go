package streams

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/cockroachdb/pebble"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// restore brings store s of task t up to the committed end of its
// changelog partition, from the store's checkpoint (0 for a new store).
// Only committed records are read, and control records are kept so the
// reader sees every offset up to the end even when the log ends with a
// transaction marker.
func (a *App) restore(ctx context.Context, t *task, s *kvStore) error {
	topic := changelogTopic(a.cfg.appID, s.name)
	from, err := s.checkpoint()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		return err
	}
	end, err := committedEnd(ctx, kadm.NewClient(cl), topic, t.id.Partition)
	cl.Close()
	if err != nil {
		return err
	}
	lag := a.m.restoreLag.WithLabelValues(s.name, t.id.String())
	if from >= end {
		lag.Set(0)
		return nil
	}
	began := time.Now()
	lag.Set(float64(end - from))
	l := a.cfg.restoreL
	if l != nil {
		l.OnRestoreStart(s.name, t.id.String(), from, end)
	}
	rc, err := kgo.NewClient(a.clientOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {t.id.Partition: kgo.NewOffset().At(from)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return err
	}
	defer rc.Close()
	n := 0
	for next := from; next < end; {
		fs := rc.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return err
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("streams: restoring %s/%d: %w", topic, t.id.Partition, fe.Err)
		}
		b := t.db.NewBatch()
		batch := 0
		var berr error
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end || berr != nil {
				return
			}
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			n++
			batch++
			if r.Value == nil {
				berr = b.Delete(s.dbKey(r.Key), nil)
			} else {
				berr = b.Set(s.dbKey(r.Key), r.Value, nil)
			}
		})
		if berr == nil {
			berr = b.Set(checkpointKey(s.name), u64(next), nil)
		}
		if berr == nil {
			berr = b.Commit(pebble.NoSync)
		} else {
			b.Close()
		}
		if berr != nil {
			return fmt.Errorf("streams: restoring %s: %w", s.name, berr)
		}
		lag.Set(float64(max(end-next, 0)))
		a.m.restored.WithLabelValues(s.name).Add(float64(batch))
		if l != nil {
			l.OnBatchRestored(s.name, t.id.String(), next, batch)
		}
	}
	if l != nil {
		l.OnRestoreEnd(s.name, t.id.String(), int64(n))
	}
	a.log.Info("store restored", "store", s.name, "task", t.id.String(), "from", from, "to", end, "records", n, "took", time.Since(began))
	return nil
}

// committedEnd is the last stable offset of a changelog partition: the end
// of what read_committed readers see.
func committedEnd(ctx context.Context, adm *kadm.Client, topic string, p int32) (int64, error) {
	offs, err := adm.ListCommittedOffsets(ctx, topic)
	if err != nil {
		return 0, fmt.Errorf("streams: listing the end of %s: %w", topic, err)
	}
	o, ok := offs.Lookup(topic, p)
	if !ok {
		return 0, fmt.Errorf("streams: changelog %s has no partition %d", topic, p)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("streams: listing the end of %s/%d: %w", topic, p, o.Err)
	}
	return o.Offset, nil
}

// ensureTopics creates the repartition and changelog topics the topology
// needs, with as many partitions as the source topics that feed them.
func (a *App) ensureTopics(ctx context.Context) error {
	cl, err := kgo.NewClient(a.clientOpts()...)
	if err != nil {
		return fmt.Errorf("streams: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	parts := map[topicRef]int32{}
	var count func(ref topicRef) (int32, error)
	count = func(ref topicRef) (int32, error) {
		if n, ok := parts[ref]; ok {
			return n, nil
		}
		if origins, ok := a.topo.repartitions[ref]; ok {
			var n int32
			for _, o := range origins {
				on, err := count(o)
				if err != nil {
					return 0, err
				}
				n = max(n, on)
			}
			parts[ref] = n
			// Records keep their event time; time retention would delete
			// old events before they are read, as Kafka Streams avoids
			// the same way.
			keep := map[string]*string{"retention.ms": kadm.StringPtr("-1")}
			return n, a.createTopic(ctx, adm, ref.resolve(a.cfg.appID), n, keep)
		}
		name := ref.resolve(a.cfg.appID)
		td, err := adm.ListTopics(ctx, name)
		if err != nil {
			return 0, fmt.Errorf("streams: describing %s: %w", name, err)
		}
		d, ok := td[name]
		if !ok || d.Err != nil {
			return 0, fmt.Errorf("streams: source topic %s: %w", name, errors.Join(d.Err, errMissing(ok)))
		}
		parts[ref] = int32(len(d.Partitions))
		return parts[ref], nil
	}
	groupParts := map[topicRef]topicRef{}
	for _, ref := range sortedRefs(a.topo.sources) {
		n, err := count(ref)
		if err != nil {
			return err
		}
		// Partition p of every topic of a task group is one task: they
		// must have as many partitions.
		rep := a.topo.groups[ref]
		if first, ok := groupParts[rep]; ok && parts[first] != n {
			return fmt.Errorf("streams: %s has %d partitions and %s %d, but they feed common state and must be co-partitioned",
				first.resolve(a.cfg.appID), parts[first], ref.resolve(a.cfg.appID), n)
		}
		groupParts[rep] = ref
	}
	a.mu.Lock()
	a.partitions = map[topicRef]int32{}
	for rep, ref := range groupParts {
		a.partitions[rep] = parts[ref]
	}
	a.mu.Unlock()
	compact := map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}
	for _, name := range sortedKeys(a.topo.stores) {
		n, err := count(a.topo.stores[name].origin)
		if err != nil {
			return err
		}
		if err := a.createTopic(ctx, adm, changelogTopic(a.cfg.appID, name), n, compact); err != nil {
			return err
		}
	}
	return nil
}

func errMissing(ok bool) error {
	if ok {
		return nil
	}
	return errors.New("does not exist")
}

func (a *App) createTopic(ctx context.Context, adm *kadm.Client, name string, parts int32, configs map[string]*string) error {
	resp, err := adm.CreateTopic(ctx, parts, -1, configs, name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("streams: creating %s: %w", name, err)
	}
	return nil
}

func u64(v int64) []byte {
	return []byte{byte(v >> 56), byte(v >> 48), byte(v >> 40), byte(v >> 32), byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
}

func sortedRefs[V any](m map[topicRef]V) []topicRef {
	refs := make([]topicRef, 0, len(m))
	for r := range m {
		refs = append(refs, r)
	}
	sort.Slice(refs, func(i, j int) bool {
		return refs[i].name < refs[j].name || refs[i].name == refs[j].name && !refs[i].internal && refs[j].internal
	})
	return refs
}
