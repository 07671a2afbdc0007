package txn

import (
	"fmt"
	"sort"
	"time"
)

// Description is one transaction as DescribeTransactions shows it.
type Description struct {
	ID         string
	State      State
	PID        int64
	Epoch      int16
	Timeout    time.Duration
	Started    time.Time // zero: no transaction running
	Partitions []TopicPartition
}

func (t *txn) describe() Description {
	d := Description{ID: t.id, State: t.state, PID: t.pid, Epoch: t.epoch, Timeout: t.timeout, Started: t.started}
	for _, tp := range sortedTopics(t.parts) {
		for _, p := range tp.Partitions {
			d.Partitions = append(d.Partitions, TopicPartition{tp.Topic, p})
		}
	}
	if t.state != Ongoing && t.state != PrepareCommit && t.state != PrepareAbort {
		d.Started = time.Time{}
	}
	return d
}

// Describe describes transactional ids; unknown ones are ErrNotFound.
func (c *Coordinator) Describe(id string) (Description, error) {
	if err := c.serves(id); err != nil {
		return Description{}, err
	}
	t, err := c.lookup(id, false)
	if err != nil {
		return Description{}, err
	}
	if t == nil {
		return Description{}, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	defer t.mu.Unlock()
	return t.describe(), nil
}

// ListFilter selects transactions; empty fields match everything.
type ListFilter struct {
	States []State
	PIDs   []int64
	// MinDuration lists only transactions running at least this long
	// (ListTransactions v1).
	MinDuration time.Duration
}

// List lists the transactions matching f that this coordinator serves,
// sorted by id.
func (c *Coordinator) List(f ListFilter) ([]Description, error) {
	if c.anyLoading() {
		return nil, ErrLoading
	}
	c.mu.Lock()
	all := make([]*txn, 0, len(c.txns))
	for _, t := range c.txns {
		all = append(all, t)
	}
	c.mu.Unlock()
	now := c.now()
	var out []Description
	for _, t := range all {
		t.mu.Lock()
		d := t.describe()
		t.mu.Unlock()
		if d.PID < 0 {
			continue
		}
		if len(f.States) > 0 && !contains(f.States, d.State) {
			continue
		}
		if len(f.PIDs) > 0 && !contains(f.PIDs, d.PID) {
			continue
		}
		if f.MinDuration > 0 && (d.Started.IsZero() || now.Sub(d.Started) < f.MinDuration) {
			continue
		}
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func contains[T comparable](s []T, v T) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
