package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/pkg/consumer"
)

// Errors of selection and replay.
var (
	ErrUnknownTopic     = errors.New("unknown topic")
	ErrUnknownPartition = errors.New("unknown partition")
	ErrBadSelection     = errors.New("bad selection")
	ErrNoOriginal       = errors.New("no original topic")
	ErrTooMany          = errors.New("too many dead letters selected")
)

// Selection picks dead letters of one dead-letter topic. The zero value
// selects every one.
type Selection struct {
	// Partition of the dead-letter topic; nil: all.
	Partition *int32 `json:"partition,omitempty"`
	// FromOffset and ToOffset bound the dead-letter offsets (both
	// inclusive; ToOffset nil: to the end).
	FromOffset int64  `json:"from_offset,omitempty"`
	ToOffset   *int64 `json:"to_offset,omitempty"`
	// SinceMs and UntilMs (Unix ms; 0: unbounded) bound when a record
	// died: its sluice-dead-at header, else its timestamp. Until is
	// exclusive.
	SinceMs int64 `json:"since_ms,omitempty"`
	UntilMs int64 `json:"until_ms,omitempty"`
	// Key, when set, keeps only records with this key.
	Key *string `json:"key,omitempty"`
	// ErrorMatch, when set, is a regular expression the sluice-error
	// header must match.
	ErrorMatch string `json:"error_match,omitempty"`

	re *regexp.Regexp
}

// Prepare checks the selection and compiles its expression.
func (s *Selection) Prepare() error {
	if s.FromOffset < 0 || (s.ToOffset != nil && *s.ToOffset < s.FromOffset) {
		to := "end"
		if s.ToOffset != nil {
			to = strconv.FormatInt(*s.ToOffset, 10)
		}
		return fmt.Errorf("%w: offsets %d to %s", ErrBadSelection, s.FromOffset, to)
	}
	if s.Partition != nil && *s.Partition < 0 {
		return fmt.Errorf("%w: partition %d", ErrBadSelection, *s.Partition)
	}
	if s.UntilMs != 0 && s.UntilMs <= s.SinceMs {
		return fmt.Errorf("%w: until %d is not after since %d", ErrBadSelection, s.UntilMs, s.SinceMs)
	}
	if s.ErrorMatch != "" {
		re, err := regexp.Compile(s.ErrorMatch)
		if err != nil {
			return fmt.Errorf("%w: error match: %v", ErrBadSelection, err)
		}
		s.re = re
	}
	return nil
}

// DiedAt is when a record went to the dead-letter topic: its
// sluice-dead-at header, or the record's timestamp.
func DiedAt(r *kgo.Record) int64 {
	if v, ok := consumer.HeaderValue(r, consumer.HeaderDeadAt); ok {
		if ms, err := strconv.ParseInt(v, 10, 64); err == nil {
			return ms
		}
	}
	return r.Timestamp.UnixMilli()
}

// Match reports whether the selection keeps r (offsets aside).
func (s *Selection) Match(r *kgo.Record) bool {
	if s.Key != nil && string(r.Key) != *s.Key {
		return false
	}
	t := DiedAt(r)
	if (s.SinceMs > 0 && t < s.SinceMs) || (s.UntilMs > 0 && t >= s.UntilMs) {
		return false
	}
	if s.re != nil {
		e, _ := consumer.HeaderValue(r, consumer.HeaderError)
		if !s.re.MatchString(e) {
			return false
		}
	}
	return true
}

// Reader reads dead-letter topics through a Kafka client.
type Reader struct {
	// Opts are the options of every client made (seed brokers, SASL,
	// dialer).
	Opts []kgo.Opt
	// Max bounds how many records one Select returns (0: no bound):
	// past it, ErrTooMany.
	Max int
}

// Offsets lists a topic's start and last stable offsets.
func (rd Reader) Offsets(ctx context.Context, adm *kadm.Client, topic string) (start, end map[int32]int64, err error) {
	s, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = s.Error()
	}
	if err != nil {
		return nil, nil, topicErr(topic, err, "listing start offsets")
	}
	// The last stable offset: a transaction still open is not waited for.
	e, err := adm.ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = e.Error()
	}
	if err != nil {
		return nil, nil, topicErr(topic, err, "listing end offsets")
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	s.Each(func(o kadm.ListedOffset) { start[o.Partition] = o.Offset })
	e.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	if len(end) == 0 {
		return nil, nil, fmt.Errorf("%w %q", ErrUnknownTopic, topic)
	}
	return start, end, nil
}

func topicErr(topic string, err error, what string) error {
	if errors.Is(err, kerr.UnknownTopicOrPartition) {
		return fmt.Errorf("%w %q", ErrUnknownTopic, topic)
	}
	return fmt.Errorf("topic %q: %s: %w", topic, what, err)
}

// Select reads the dead letters s selects, in partition and offset order.
func (rd Reader) Select(ctx context.Context, adm *kadm.Client, topic string, s *Selection) ([]*kgo.Record, error) {
	start, end, err := rd.Offsets(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	if s.Partition != nil {
		if _, ok := end[*s.Partition]; !ok {
			return nil, fmt.Errorf("%w %d of %q", ErrUnknownPartition, *s.Partition, topic)
		}
	}
	from, to := map[int32]int64{}, map[int32]int64{}
	for p := range end {
		if s.Partition != nil && p != *s.Partition {
			continue
		}
		from[p] = max(start[p], s.FromOffset)
		to[p] = end[p]
		if s.ToOffset != nil {
			to[p] = min(end[p], *s.ToOffset+1)
		}
	}
	var out []*kgo.Record
	err = rd.Range(ctx, topic, from, to, func(r *kgo.Record) error {
		if !s.Match(r) {
			return nil
		}
		if rd.Max > 0 && len(out) >= rd.Max {
			return fmt.Errorf("%w: more than %d; narrow the selection (offsets, time, key, error) or use `sluice dlq replay`", ErrTooMany, rd.Max)
		}
		out = append(out, r)
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	return out, nil
}

// Range reads each partition p from from[p] up to (not including) to[p],
// committed records only, calling each for every record in offset order
// within a partition; an error from each stops the read.
func (rd Reader) Range(ctx context.Context, topic string, from, to map[int32]int64, each func(*kgo.Record) error) error {
	want := map[int32]kgo.Offset{}
	for p, f := range from {
		if f < to[p] {
			want[p] = kgo.NewOffset().At(f)
		}
	}
	if len(want) == 0 {
		return nil
	}
	opts := append(slices.Clip(rd.Opts),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: want}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for len(want) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("reading %q: %w", topic, err)
		}
		for _, fe := range fs.Errors() {
			return fmt.Errorf("reading %q partition %d: %w", topic, fe.Partition, fe.Err)
		}
		var stop error
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			if _, open := want[fp.Partition]; !open || stop != nil {
				return
			}
			for _, r := range fp.Records {
				// Control records (kept so the loop sees every offset up
				// to the end, which a transaction marker may be) are not
				// passed on.
				if r.Offset < to[fp.Partition] && !r.Attrs.IsControl() {
					if stop = each(r); stop != nil {
						return
					}
				}
			}
			if n := len(fp.Records); n > 0 && fp.Records[n-1].Offset >= to[fp.Partition]-1 {
				delete(want, fp.Partition)
			}
		})
		if stop != nil {
			return stop
		}
	}
	return nil
}

// Replayed returns the marks of dead-letter topic dlq's replay log
// ("<partition>/<offset>" of each dead letter replayed); an absent log is
// empty.
func (rd Reader) Replayed(ctx context.Context, adm *kadm.Client, dlq string) (map[string]bool, error) {
	log := dlq + ReplayedSuffix
	start, end, err := rd.Offsets(ctx, adm, log)
	if errors.Is(err, ErrUnknownTopic) {
		return map[string]bool{}, nil
	}
	if err != nil {
		return nil, err
	}
	done := map[string]bool{}
	err = rd.Range(ctx, log, start, end, func(r *kgo.Record) error {
		if r.Value == nil {
			delete(done, string(r.Key))
		} else {
			done[string(r.Key)] = true
		}
		return nil
	})
	return done, err
}

// Mark is the replay log's key for a dead letter.
func Mark(r *kgo.Record) string {
	return strconv.Itoa(int(r.Partition)) + "/" + strconv.FormatInt(r.Offset, 10)
}

// Planned is one dead letter to write again: Dead as it was read, Out as
// it is written (Partition -1: by the destination's partitioner).
type Planned struct {
	Dead *kgo.Record
	Out  *kgo.Record
}

// Plan is what a replay does or did.
type Plan struct {
	Replays []Planned
	// Skipped counts selected dead letters that were replayed before.
	Skipped int
}

// ReplayOptions say where a replay writes and how.
type ReplayOptions struct {
	// To is the destination topic; "": each record's original topic.
	To string
	// DryRun plans and writes nothing.
	DryRun bool
	// Batch is how many records one transaction writes (default 500).
	Batch int
	// Permit, when set, is asked about every destination topic before
	// anything is written; an error refuses the whole replay.
	Permit func(topic string) error
}

// Replay writes the dead letters sel selects again, each at most once
// however often replay runs: a replayed record and a marker keyed
// "<partition>/<offset>" in the compacted topic <dlq>.replayed are written
// in one transaction, and records with a marker are skipped. A crash
// mid-replay leaves whole batches done or not. Two replays of one
// dead-letter topic at once share a transactional id, so the later aborts
// the earlier's open batch (a batch the earlier committed after the later
// read the markers is written again: do not run two at once).
func (rd Reader) Replay(ctx context.Context, dlq string, sel *Selection, o ReplayOptions) (Plan, error) {
	if o.Batch <= 0 {
		o.Batch = 500
	}
	cl, err := kgo.NewClient(rd.Opts...)
	if err != nil {
		return Plan{}, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	recs, err := rd.Select(ctx, adm, dlq, sel)
	if err != nil {
		return Plan{}, err
	}
	all := make([]Planned, 0, len(recs))
	var unplanned map[*kgo.Record]error // no destination: an error unless replayed before
	for _, r := range recs {
		out, err := ReplayRecord(dlq, r, o.To)
		if err != nil {
			if unplanned == nil {
				unplanned = map[*kgo.Record]error{}
			}
			unplanned[r] = err
		}
		all = append(all, Planned{Dead: r, Out: out})
	}
	// Destinations are checked before anything else is read as the
	// caller (the replay log): a refusal names what was refused.
	if o.Permit != nil {
		seen := map[string]bool{}
		for _, p := range all {
			if p.Out != nil && !seen[p.Out.Topic] {
				seen[p.Out.Topic] = true
				if err := o.Permit(p.Out.Topic); err != nil {
					return Plan{}, err
				}
			}
		}
	}
	done, err := rd.Replayed(ctx, adm, dlq)
	if err != nil {
		return Plan{}, err
	}
	var plan Plan
	for _, p := range all {
		if done[Mark(p.Dead)] {
			plan.Skipped++
			continue
		}
		if err := unplanned[p.Dead]; err != nil {
			return Plan{}, err
		}
		plan.Replays = append(plan.Replays, p)
	}
	if o.DryRun || len(plan.Replays) == 0 {
		return plan, nil
	}
	if err := ensureReplayLog(ctx, adm, dlq+ReplayedSuffix); err != nil {
		return Plan{}, err
	}
	if err := rd.write(ctx, dlq, plan.Replays, o.Batch); err != nil {
		return Plan{}, err
	}
	return plan, nil
}

// ReplayRecord is what dead letter r of dlq is written as, to topic to
// ("": its original topic, and its original partition there). The
// convention's headers are dropped and sluice-replay-of
// (<dlq>/<partition>/<offset>) is added; key, value and other headers are
// kept.
func ReplayRecord(dlq string, r *kgo.Record, to string) (*kgo.Record, error) {
	origTopic, _ := consumer.HeaderValue(r, consumer.HeaderOriginalTopic)
	out := &kgo.Record{Topic: to, Partition: -1, Key: r.Key, Value: r.Value}
	if to == "" {
		if origTopic == "" {
			return nil, fmt.Errorf("%w: dead letter %s/%d/%d has no %s header: name a destination topic", ErrNoOriginal, dlq, r.Partition, r.Offset, consumer.HeaderOriginalTopic)
		}
		out.Topic = origTopic
	}
	if out.Topic == origTopic {
		if v, ok := consumer.HeaderValue(r, consumer.HeaderOriginalPartition); ok {
			if p, err := strconv.ParseInt(v, 10, 32); err == nil && p >= 0 {
				out.Partition = int32(p)
			}
		}
	}
	for _, h := range r.Headers {
		if strings.HasPrefix(h.Key, "sluice-retry-") || strings.HasPrefix(h.Key, "sluice-original-") ||
			h.Key == consumer.HeaderError || h.Key == consumer.HeaderGroup || h.Key == consumer.HeaderDeadAt ||
			h.Key == consumer.HeaderReplayOf || h.Key == consumer.HeaderDelayMs {
			continue
		}
		out.Headers = append(out.Headers, h)
	}
	out.Headers = append(out.Headers, kgo.RecordHeader{Key: consumer.HeaderReplayOf, Value: []byte(dlq + "/" + Mark(r))})
	return out, nil
}

func ensureReplayLog(ctx context.Context, adm *kadm.Client, topic string) error {
	resp, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")}, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return topicErr(topic, err, "creating the replay log")
	}
	return nil
}

// write writes the plan in transactions of batch records, each replayed
// record with its marker.
func (rd Reader) write(ctx context.Context, dlq string, plan []Planned, batch int) error {
	byKey := kgo.StickyKeyPartitioner(nil)
	part := kgo.BasicConsistentPartitioner(func(topic string) func(*kgo.Record, int) int {
		tp := byKey.ForTopic(topic)
		return func(r *kgo.Record, n int) int {
			if r.Partition >= 0 && int(r.Partition) < n {
				return int(r.Partition)
			}
			return tp.Partition(r, n)
		}
	})
	cl, err := kgo.NewClient(append(slices.Clip(rd.Opts),
		kgo.TransactionalID("sluice-dlq-replay."+dlq),
		kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(part),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	logTopic := dlq + ReplayedSuffix
	now := []byte(strconv.FormatInt(time.Now().UnixMilli(), 10))
	for i := 0; i < len(plan); i += batch {
		chunk := plan[i:min(i+batch, len(plan))]
		if err := cl.BeginTransaction(); err != nil {
			return fmt.Errorf("beginning a transaction: %w", err)
		}
		var recs []*kgo.Record
		for _, p := range chunk {
			mark := &kgo.Record{Topic: logTopic, Partition: 0, Key: []byte(Mark(p.Dead)),
				Value: append([]byte(p.Out.Topic+" "), now...)}
			recs = append(recs, p.Out, mark)
		}
		produceErr := cl.ProduceSync(ctx, recs...).FirstErr()
		commit := kgo.TryCommit
		if produceErr != nil {
			commit = kgo.TryAbort
		}
		if err := cl.EndTransaction(ctx, commit); err != nil {
			return fmt.Errorf("ending the transaction: %w", err)
		}
		if produceErr != nil {
			return fmt.Errorf("replaying (the transaction was aborted; %d records were replayed before it): %w", i, produceErr)
		}
	}
	return nil
}
