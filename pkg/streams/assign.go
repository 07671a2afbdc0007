package streams

import (
	"context"
	"errors"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Rebalances are cooperative: kgo calls onRevoked with only the partitions
// that move away and onAssigned with only the new ones, so tasks that stay
// are never closed. A new task is restored on its own goroutine while its
// partitions are paused; the instance's other tasks keep processing.

// tasksOf groups partitions by task, with each task's partitions.
func (a *App) tasksOf(parts map[string][]int32) map[taskID]map[string][]int32 {
	out := map[taskID]map[string][]int32{}
	for topic, ps := range parts {
		for _, p := range ps {
			id, ok := a.taskOf(topic, p)
			if !ok {
				continue
			}
			if out[id] == nil {
				out[id] = map[string][]int32{}
			}
			out[id][topic] = append(out[id][topic], p)
		}
	}
	return out
}

func (a *App) onAssigned(_ context.Context, cl *kgo.Client, added map[string][]int32) {
	a.mu.Lock()
	for id, parts := range a.tasksOf(added) {
		if a.tasks[id] != nil || a.opening[id] != nil {
			continue
		}
		// Paused before the first fetch: kgo calls this before it
		// fetches the partitions' offsets.
		cl.PauseFetchPartitions(parts)
		ctx, cancel := context.WithCancel(a.ctx)
		op := &opening{cancel: cancel, done: make(chan struct{}), parts: parts, cl: cl}
		a.opening[id] = op
		a.m.tasks.WithLabelValues("restoring").Set(float64(len(a.opening)))
		go a.restoreTask(ctx, id, op)
	}
	a.mu.Unlock()
	a.sb.reconcile()
}

// restoreTask opens and restores task id, then makes it active and resumes
// its partitions, unless it was revoked meanwhile.
func (a *App) restoreTask(ctx context.Context, id taskID, op *opening) {
	defer close(op.done)
	began := time.Now()
	a.sb.release(id)
	t, err := a.openTask(ctx, id)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.opening[id] != op {
		if t != nil {
			t.db.Close()
		}
		return
	}
	delete(a.opening, id)
	a.m.tasks.WithLabelValues("restoring").Set(float64(len(a.opening)))
	if err != nil {
		if a.restoreErr == nil && !errors.Is(err, context.Canceled) {
			a.restoreErr = err
		}
		return
	}
	a.tasks[id] = t
	a.m.tasksOpened.Inc()
	a.m.tasks.WithLabelValues("active").Set(float64(len(a.tasks)))
	op.cl.ResumeFetchPartitions(op.parts)
	a.log.Info("task opened", "task", id.String(), "took", time.Since(began))
}

// dropTasks closes the tasks of partitions this instance no longer owns,
// and stops their restores. Their uncommitted work is dropped: under
// ExactlyOnce the transaction aborts; the new owner restores from the
// changelog.
func (a *App) dropTasks(parts map[string][]int32) {
	a.mu.Lock()
	var wait []*opening
	for id := range a.tasksOf(parts) {
		if op := a.opening[id]; op != nil {
			op.cancel()
			delete(a.opening, id)
			wait = append(wait, op)
		}
		a.closeTask(id)
	}
	a.m.tasks.WithLabelValues("restoring").Set(float64(len(a.opening)))
	a.mu.Unlock()
	for _, op := range wait {
		<-op.done
	}
}

func (a *App) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	a.dropTasks(lost)
	a.sb.reconcile()
}

func (a *App) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	if len(revoked) == 0 {
		return
	}
	if a.cfg.guarantee == AtLeastOnce {
		// Commit what was processed before the partitions move.
		if err := a.commitAtLeastOnce(ctx, cl); err != nil {
			a.log.Warn("commit on revoke", "err", err)
		}
	}
	a.dropTasks(revoked)
	a.sb.reconcile()
}

// activeOrOpening lists the tasks this instance owns, by group.
func (a *App) activeOrOpening() map[taskID]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[taskID]bool{}
	for id := range a.tasks {
		out[id] = true
	}
	for id := range a.opening {
		out[id] = true
	}
	return out
}

func sortedIDs[V any](m map[taskID]V) []taskID {
	ids := make([]taskID, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		return ids[i].Topic < ids[j].Topic || ids[i].Topic == ids[j].Topic && ids[i].Partition < ids[j].Partition
	})
	return ids
}
