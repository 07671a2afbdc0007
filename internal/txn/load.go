package txn

import (
	"context"
	"fmt"
	"time"

	"github.com/sluice-mq/sluice/internal/log/batch"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// loadAll replays the state topic, retrying until it succeeds, then
// finishes every transaction left between Prepare and Complete. It returns
// false if the coordinator closed first.
func (c *Coordinator) loadAll() bool {
	began := c.now()
	for backoff := 100 * time.Millisecond; ; backoff = min(2*backoff, 5*time.Second) {
		err := c.load(c.ctx)
		if err == nil {
			break
		}
		c.logger.Error("loading transactions failed; retrying", "err", err, "backoff", backoff)
		select {
		case <-time.After(backoff):
		case <-c.ctx.Done():
			return false
		}
	}
	c.mu.Lock()
	var pending []*txn
	for _, t := range c.txns {
		if t.state == PrepareCommit || t.state == PrepareAbort {
			t.completing = true
			pending = append(pending, t)
		}
	}
	n := len(c.txns)
	c.mu.Unlock()
	c.loading.Store(false)
	c.logger.Info("transactions loaded", "transactions", n, "completing", len(pending), "duration", c.now().Sub(began))
	for _, t := range pending {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.completeRetrying(t)
		}()
	}
	return true
}

func (c *Coordinator) load(ctx context.Context) error {
	n := c.store.Partitions()
	loaded := map[string]*txn{}
	for p := int32(0); p < n; p++ {
		if err := c.loadPartition(ctx, p, loaded); err != nil {
			return err
		}
	}
	c.mu.Lock()
	c.txns = loaded
	c.mu.Unlock()
	if n > 0 {
		c.parts.Store(n)
	}
	return nil
}

func (c *Coordinator) loadPartition(ctx context.Context, p int32, loaded map[string]*txn) error {
	read := func(ctx context.Context, offset int64) ([]byte, int64, error) { return c.store.Read(ctx, p, offset) }
	return batch.Replay(ctx, fmt.Sprintf("%s-%d", Topic, p), read, func(h *batch.Header, recs []kmsg.Record, end int64) error {
		if h.IsControl() {
			return nil
		}
		for i := range recs {
			r := &recs[i]
			if h.BaseOffset+int64(r.OffsetDelta) >= end {
				break
			}
			c.replay(r.Key, r.Value, loaded)
		}
		return nil
	})
}

func (c *Coordinator) replay(key, value []byte, loaded map[string]*txn) {
	id, v, ok, err := decodeRecord(key, value)
	if err != nil {
		c.logger.Warn("skipping unreadable record in the transaction log", "err", err)
		return
	}
	if !ok {
		return
	}
	if v == nil {
		delete(loaded, id)
		return
	}
	t := loaded[id]
	if t == nil {
		t = &txn{id: id, lastEpoch: -1, prevPID: -1}
		loaded[id] = t
	} else if t.pid == v.ProducerID && t.epoch != v.ProducerEpoch {
		t.lastEpoch = t.epoch
	} else if t.pid != v.ProducerID {
		t.prevPID, t.lastEpoch = t.pid, -1
	}
	s := snapshot{pid: v.ProducerID, epoch: v.ProducerEpoch, timeout: time.Duration(v.TimeoutMillis) * time.Millisecond,
		state: State(v.State), parts: map[TopicPartition]struct{}{}, updated: time.UnixMilli(v.LastUpdateTimestamp)}
	if v.StartTimestamp >= 0 {
		s.started = time.UnixMilli(v.StartTimestamp)
	}
	for _, tp := range v.Topics {
		for _, p := range tp.Partitions {
			s.parts[TopicPartition{tp.Topic, p}] = struct{}{}
		}
	}
	t.snapshot = s
}
