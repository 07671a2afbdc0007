package consumer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ensureScanned rebuilds the park state of a main topic partition from its
// retry partition, once per assignment, before any of its records run.
//
// The state is what the retry partition holds from the group's committed
// offset to its end: every record there will be read again, so each counts
// as pending for its key, and each hold marker there names a head that is
// not known to be done (a marker stays uncommitted until its head is done).
// With ExactlyOnce the partition is read committed, and done markers there
// name records finished since the commit: they are skipped when read again,
// and a finished hold marker names no held key.
func (c *Consumer) ensureScanned(ctx context.Context, main string, p int32) {
	rt := c.retryOf[main]
	if rt == "" || !c.cfg.park {
		return
	}
	c.mu.Lock()
	done := c.scanned[tp{main, p}]
	c.mu.Unlock()
	if done {
		return
	}
	for attempt := 1; ; attempt++ {
		recs, err := c.readRetryPartition(ctx, rt, p)
		if err == nil {
			c.install(main, p, recs)
			return
		}
		if ctx.Err() != nil {
			return
		}
		c.cfg.logger.Warn("reading retry partition to rebuild parked keys; trying again", "topic", rt, "partition", p, "err", err)
		if !c.sleep(ctx, c.backoff(min(attempt, 10))) {
			return
		}
	}
}

func (c *Consumer) install(main string, p int32, recs []*kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.scanned[tp{main, p}] = true
	done := map[int64]bool{}
	for _, r := range recs {
		if info, err := DecodeRetryInfo(r); err == nil && info.Kind == KindDone {
			done[info.DoneOffset] = true
		}
	}
	if len(done) > 0 {
		c.doneOffs[tp{c.retryOf[main], p}] = done
	} else {
		delete(c.doneOffs, tp{c.retryOf[main], p})
	}
	for _, r := range recs {
		info, err := DecodeRetryInfo(r)
		if err == nil && info.Kind == KindDone {
			continue // read back without counting, as process does
		}
		ks := c.laneLocked(main, p, r.Key)
		ks.pending++
		if err != nil || info.Kind != KindHold || done[r.Offset] {
			continue
		}
		hid := info.Origin.ID()
		known := false
		for _, h := range ks.heads {
			known = known || h.id == hid
		}
		if !known {
			ks.heads = append(ks.heads, head{id: hid})
			c.noteHeld(ks)
		}
	}
}

// readRetryPartition returns the records of topic/p from the group's
// committed offset (or the start) to the end offset listed now (the last
// stable offset, read committed, with ExactlyOnce).
func (c *Consumer) readRetryPartition(ctx context.Context, topic string, p int32) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.cl)
	from := int64(-1)
	fctx := ctx
	if c.sess != nil {
		fctx = kadm.RequireStable(ctx) // wait out a killed member's open transaction
	}
	fetched, err := adm.FetchOffsetsForTopics(fctx, c.cfg.group, topic)
	if err != nil {
		return nil, fmt.Errorf("fetching committed offsets: %w", err)
	}
	if o, ok := fetched.Lookup(topic, p); ok {
		if o.Err != nil {
			// Reading from the start instead would hold keys whose
			// records are long done.
			return nil, fmt.Errorf("committed offset of %s/%d: %w", topic, p, o.Err)
		}
		if o.At >= 0 {
			from = o.At
		}
	}
	listEnds := adm.ListEndOffsets
	extra := []kgo.Opt{kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}})}
	if c.sess != nil {
		listEnds = adm.ListCommittedOffsets
		// Control records come through so that the end is seen even when
		// the last records before it were aborted.
		extra = append(extra, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
	}
	ends, err := listEnds(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("listing end offsets: %w", err)
	}
	end, ok := ends.Lookup(topic, p)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("end offset of %s/%d: %v", topic, p, end.Err)
	}
	if from < 0 {
		starts, err := adm.ListStartOffsets(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("listing start offsets: %w", err)
		}
		s, _ := starts.Lookup(topic, p)
		from = s.Offset
	}
	if from >= end.Offset {
		return nil, nil
	}
	if from < 0 {
		return nil, fmt.Errorf("no start offset for %s/%d", topic, p)
	}
	extra[0] = kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}})
	rd, err := kgo.NewClient(c.sideOpts(extra...)...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*kgo.Record
	for empty := 0; ; {
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		fs := rd.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if fs.NumRecords() == 0 && c.sess != nil {
			// Read committed, records aborted by a transaction that
			// ended after another began are filtered out and their
			// marker is past the end: after ten quiet seconds nothing
			// more is coming below the end.
			if empty++; empty == 5 {
				return out, nil
			}
			continue
		}
		empty = 0
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				ferr = err
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		for _, r := range fs.Records() {
			if r.Offset < end.Offset && !r.Attrs.IsControl() {
				out = append(out, r)
			}
			if r.Offset >= end.Offset-1 {
				return out, nil
			}
		}
	}
}
