package trace

import (
	"context"
	"slices"
	"strconv"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Header names of the retry and dead-letter convention (docs/retries.md).
const (
	hdrOrigTopic     = "sluice-original-topic"
	hdrOrigPartition = "sluice-original-partition"
	hdrOrigOffset    = "sluice-original-offset"
	hdrAttempts      = "sluice-retry-attempts"
	hdrKind          = "sluice-retry-kind"
	hdrError         = "sluice-error"
	hdrGroup         = "sluice-group"
)

// hopScanBytes bounds what is read of a retry or dead-letter topic to
// find a record's copies.
const hopScanBytes = 256 << 20

// annotate adds producers, transaction outcomes, group positions and hops.
func (t *Tracer) annotate(ctx context.Context, recs []Record) error {
	groups, err := t.groups.Groups()
	if err != nil {
		groups = nil // loading: positions left out
	}
	names := map[int64]Producer{}
	for i := range recs {
		r := &recs[i]
		if pid := r.Producer.ProducerID; pid >= 0 && t.producers != nil {
			p, ok := names[pid]
			if !ok {
				if lp, found := t.producers.Producer(ctx, pid); found {
					p = Producer{ClientID: lp.ClientID, Principal: lp.Principal, TransactionalID: lp.TransactionalID, Known: true}
				}
				names[pid] = p
			}
			r.Producer.ClientID, r.Producer.Principal, r.Producer.TransactionalID, r.Producer.Known = p.ClientID, p.Principal, p.TransactionalID, p.Known
		}
		if r.Transaction == "pending" {
			r.Transaction = t.outcome(ctx, r)
		}
		for _, g := range groups {
			for _, o := range g.Offsets {
				if o.Topic == r.Topic && o.Partition == r.Partition {
					r.Groups = append(r.Groups, GroupPosition{Group: g.Group, Committed: o.Offset, Past: o.Offset > r.Offset})
				}
			}
		}
		slices.SortFunc(r.Groups, func(a, b GroupPosition) int {
			switch {
			case a.Group < b.Group:
				return -1
			case a.Group > b.Group:
				return 1
			}
			return 0
		})
		if r.Groups == nil {
			r.Groups = []GroupPosition{}
		}
		t.hops(ctx, r)
	}
	return nil
}

// outcome reads forward from a transactional record to its producer's
// next marker: "committed", "aborted", or "open" when there is none yet.
func (t *Tracer) outcome(ctx context.Context, r *Record) string {
	_, end, err := t.log.Offsets(r.Topic, r.Partition)
	if err != nil {
		return "unknown"
	}
	from, read := r.Offset+1, int64(0)
	for from < end && read < hopScanBytes {
		b, err := t.log.Read(ctx, r.Topic, r.Partition, from, readChunk)
		if err != nil || len(b) == 0 {
			return "unknown"
		}
		read += int64(len(b))
		for len(b) >= batch.HeaderSize {
			size, err := batch.Size(b)
			if err != nil || size > len(b) {
				return "unknown"
			}
			bt := b[:size]
			b = b[size:]
			from = batch.LastOffset(bt) + 1
			if batch.Attributes(bt)&batch.AttrControl == 0 || batch.ProducerID(bt) != r.Producer.ProducerID {
				continue
			}
			x, err := t.log.Decode(ctx, r.Topic, r.Partition, bt)
			if err != nil || len(x.Records) == 0 {
				return "unknown"
			}
			commit, ok := batch.ControlType(x.Records[0].Key)
			x.Release()
			switch {
			case !ok:
				return "unknown"
			case commit:
				return "committed"
			default:
				return "aborted"
			}
		}
	}
	return "open"
}

// hops adds where a record came from (its sluice-original-* headers) and
// where copies of it went (records of <topic>.retry and <topic>.dlq whose
// headers point at it, read from its timestamp on).
func (t *Tracer) hops(ctx context.Context, r *Record) {
	hv := func(name string) string {
		for i := len(r.Headers) - 1; i >= 0; i-- {
			if r.Headers[i].Key == name {
				return r.Headers[i].Value
			}
		}
		return ""
	}
	if ot := hv(hdrOrigTopic); ot != "" {
		p, _ := strconv.ParseInt(hv(hdrOrigPartition), 10, 32)
		o, _ := strconv.ParseInt(hv(hdrOrigOffset), 10, 64)
		r.Hops = append(r.Hops, Hop{Direction: "from", Topic: ot, Partition: int32(p), Offset: o, Kind: hv(hdrKind),
			Attempts: hv(hdrAttempts), Error: hv(hdrError), Group: hv(hdrGroup)})
		return
	}
	for _, suffix := range []string{".retry", ".dlq"} {
		topic := r.Topic + suffix
		if _, err := t.log.Partitions(topic); err != nil {
			continue
		}
		q := Query{Topic: topic, Partition: -1, Offset: -1, StartOffset: -1, From: r.Timestamp, HeaderName: hdrOrigOffset,
			HeaderValue: strconv.FormatInt(r.Offset, 10), Limit: 100, MaxScanBytes: hopScanBytes}
		s := &scan{t: t, q: q}
		n, _ := t.log.Partitions(topic)
		for p := range n {
			if s.partition(ctx, p) != nil {
				break
			}
		}
		for _, c := range s.result().Records {
			cv := func(name string) string {
				for i := len(c.Headers) - 1; i >= 0; i-- {
					if c.Headers[i].Key == name {
						return c.Headers[i].Value
					}
				}
				return ""
			}
			if cv(hdrOrigTopic) != r.Topic || cv(hdrOrigPartition) != strconv.Itoa(int(r.Partition)) {
				continue
			}
			kind := cv(hdrKind)
			if kind == "" {
				kind = suffix[1:]
			}
			r.Hops = append(r.Hops, Hop{Direction: "to", Topic: c.Topic, Partition: c.Partition, Offset: c.Offset, Timestamp: c.Timestamp,
				Kind: kind, Attempts: cv(hdrAttempts), Error: cv(hdrError), Group: cv(hdrGroup)})
		}
	}
}
