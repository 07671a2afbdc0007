package registry

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// LogStore is the Store on the broker's log engine: appends go to the
// partition when this broker leads it. Reads go to the engine on a single
// node, and through a Kafka client (Remote) in a cluster, where the
// partition's data is served by its leader.
type LogStore struct {
	e       *log.Engine
	it      *log.InternalTopic
	remote  *remoteReader // nil: read the engine
	created chan struct{} // closed once this broker made sure the topic exists
	once    sync.Once
}

// pollIdle bounds one wait for new records, so that Run notices the end
// of its context and, in a cluster, asks for the high watermark.
const pollIdle = 5 * time.Second

// NewLogStore makes the store over e. opts, when not nil, are the
// options of a Kafka client reaching the cluster (the inter-broker
// listener), which reads the topic (cluster mode).
func NewLogStore(e *log.Engine, opts []kgo.Opt) *LogStore {
	s := &LogStore{e: e, it: log.NewInternalTopic(e, Topic), created: make(chan struct{})}
	if opts != nil {
		s.remote = &remoteReader{opts: opts}
	}
	return s
}

// create creates _schemas (compacted, one partition) unless it exists:
// on the first write, as Kafka creates __consumer_offsets on first use,
// so a broker whose registry is never written has no such topic.
func (s *LogStore) create(ctx context.Context) error {
	if _, err := s.it.Create(ctx, 1); err != nil {
		return fmt.Errorf("registry: creating %s: %w", Topic, err)
	}
	s.once.Do(func() { close(s.created) })
	return nil
}

// Close releases the cluster client.
func (s *LogStore) Close() {
	if s.remote != nil && s.remote.cl != nil {
		s.remote.cl.Close()
	}
}

func (s *LogStore) led(ctx context.Context) (*log.Partition, error) {
	p, err := s.e.Partition(Topic, 0)
	if errors.Is(err, log.ErrUnknownTopicOrPartition) {
		if err := s.create(ctx); err != nil {
			return nil, err
		}
		// In a cluster the partition gets a leader shortly: the caller
		// sees ErrNotLeader until then and waits for one.
		p, err = s.e.Partition(Topic, 0)
	}
	if err != nil {
		return nil, err
	}
	if !p.Led() {
		return nil, ErrNotLeader
	}
	return p, nil
}

// End implements Store.
func (s *LogStore) End(ctx context.Context) (int64, error) {
	p, err := s.led(ctx)
	if err != nil {
		return 0, err
	}
	return p.HighWatermark(), nil
}

// Append implements Store.
func (s *LogStore) Append(ctx context.Context, recs []Record) (int64, error) {
	if _, err := s.led(ctx); err != nil {
		return 0, err
	}
	krs := make([]kmsg.Record, len(recs))
	for i, r := range recs {
		krs[i] = kmsg.Record{Key: r.Key, Value: r.Value}
	}
	b, err := batch.Build(0, time.Now().UnixMilli(), krs)
	if err != nil {
		return 0, err
	}
	base, err := s.it.Append(ctx, 0, b)
	if errors.Is(err, log.ErrNotLeader) {
		return 0, fmt.Errorf("%w: %v", ErrNotLeader, err)
	}
	if err != nil {
		return 0, err
	}
	return base + int64(len(recs)), nil
}

// Latest implements Store.
func (s *LogStore) Latest(ctx context.Context) (int64, error) {
	if s.remote != nil {
		return s.remote.latest(ctx)
	}
	p, err := s.e.Partition(Topic, 0)
	if errors.Is(err, log.ErrUnknownTopicOrPartition) {
		return 0, nil // not created yet: nothing to load
	}
	if err != nil {
		return 0, err
	}
	return p.HighWatermark(), nil
}

// Fetch implements Store.
func (s *LogStore) Fetch(ctx context.Context, offset int64) ([]Record, int64, error) {
	if s.remote != nil {
		return s.remote.fetch(ctx, offset)
	}
	p, err := s.e.Partition(Topic, 0)
	if errors.Is(err, log.ErrUnknownTopicOrPartition) {
		// Not created yet: wait for this broker's first write to create it.
		select {
		case <-s.created:
		case <-time.After(pollIdle):
		case <-ctx.Done():
		}
		return nil, offset, nil
	}
	if err != nil {
		return nil, offset, err
	}
	data, hw, err := s.it.Read(ctx, 0, offset)
	if err != nil {
		return nil, offset, err
	}
	if len(data) == 0 {
		wctx, cancel := context.WithTimeout(ctx, pollIdle)
		p.WaitHighWatermark(wctx, offset+1)
		cancel()
		return nil, offset, nil
	}
	var out []Record
	next := offset
	for len(data) > 0 {
		size, err := batch.Size(data)
		if err != nil || size > len(data) {
			return nil, offset, fmt.Errorf("%s at %d: bad batch: %v", Topic, next, err)
		}
		h, recs, err := batch.Records(data[:size])
		data = data[size:]
		if err != nil {
			return nil, offset, fmt.Errorf("%s at %d: %w", Topic, next, err)
		}
		if h.LastOffset() < next {
			continue
		}
		for _, r := range recs {
			at := h.BaseOffset + int64(r.OffsetDelta)
			if at >= offset && at < hw && !h.IsControl() {
				out = append(out, Record{Offset: at, Key: r.Key, Value: r.Value})
			}
		}
		next = min(h.LastOffset()+1, hw)
	}
	return out, next, nil
}

// remoteReader consumes _schemas with a Kafka client.
type remoteReader struct {
	opts []kgo.Opt
	cl   *kgo.Client
	pos  int64 // where the client consumes next
}

func (r *remoteReader) client(offset int64) error {
	if r.cl != nil && r.pos == offset {
		return nil
	}
	if r.cl != nil {
		r.cl.Close()
	}
	cl, err := kgo.NewClient(append([]kgo.Opt{
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{Topic: {0: kgo.NewOffset().At(offset)}}),
		kgo.FetchMaxWait(pollIdle), kgo.MetadataMinAge(500 * time.Millisecond),
	}, r.opts...)...)
	if err != nil {
		return err
	}
	r.cl, r.pos = cl, offset
	return nil
}

func (r *remoteReader) latest(ctx context.Context) (int64, error) {
	if err := r.client(0); err != nil {
		return 0, err
	}
	ends, err := kadm.NewClient(r.cl).ListEndOffsets(ctx, Topic)
	if err != nil {
		return 0, err
	}
	o, ok := ends.Lookup(Topic, 0)
	if !ok || errors.Is(o.Err, kerr.UnknownTopicOrPartition) {
		return 0, nil // not created yet: nothing to load
	}
	return o.Offset, o.Err
}

func (r *remoteReader) fetch(ctx context.Context, offset int64) ([]Record, int64, error) {
	if err := r.client(offset); err != nil {
		return nil, offset, err
	}
	pctx, cancel := context.WithTimeout(ctx, pollIdle)
	fs := r.cl.PollFetches(pctx)
	cancel()
	var out []Record
	next := offset
	var ferr error
	fs.EachError(func(_ string, _ int32, err error) {
		if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) {
			ferr = err
		}
	})
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		for _, rec := range p.Records {
			out = append(out, Record{Offset: rec.Offset, Key: rec.Key, Value: rec.Value})
			next = rec.Offset + 1
		}
	})
	r.pos = next
	if len(out) == 0 && ferr != nil {
		return nil, offset, ferr
	}
	return out, next, nil
}
