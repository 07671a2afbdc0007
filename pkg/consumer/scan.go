package consumer

import (
	"context"
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
	for _, r := range recs {
		info, err := DecodeRetryInfo(r)
		ks := c.laneLocked(main, p, r.Key)
		ks.pending++
		if err != nil || info.Kind != KindHold {
			continue
		}
		hid := info.Origin.ID()
		known := false
		for _, h := range ks.heads {
			known = known || h.id == hid
		}
		if !known {
			ks.heads = append(ks.heads, head{id: hid})
		}
	}
}

// readRetryPartition returns the records of topic/p from the group's
// committed offset (or the start) to the end offset listed now.
func (c *Consumer) readRetryPartition(ctx context.Context, topic string, p int32) ([]*kgo.Record, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	adm := kadm.NewClient(c.cl)
	from := int64(-1)
	fetched, err := adm.FetchOffsetsForTopics(ctx, c.cfg.group, topic)
	if err != nil {
		return nil, fmt.Errorf("fetching committed offsets: %w", err)
	}
	if o, ok := fetched.Lookup(topic, p); ok && o.Err == nil && o.At >= 0 {
		from = o.At
	}
	ends, err := adm.ListEndOffsets(ctx, topic)
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
	rd, err := kgo.NewClient(c.sideOpts(
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {p: kgo.NewOffset().At(from)}}),
	)...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var out []*kgo.Record
	for {
		fs := rd.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return nil, ferr
		}
		for _, r := range fs.Records() {
			if r.Offset < end.Offset {
				out = append(out, r)
			}
			if r.Offset >= end.Offset-1 {
				return out, nil
			}
		}
	}
}
