package fault

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// readDeadline bounds one read of a topic by a checker; faults are over
// when checkers run, so this only has to outlast a slow machine.
const readDeadline = 3 * time.Minute

// endOffsets lists the high watermarks of topic's partitions, retrying
// while leadership settles after a fault.
func endOffsets(t *testing.T, tg *target, topic string) map[int32]int64 {
	t.Helper()
	cl := tg.client("check-offsets")
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var out map[int32]int64
	testbroker.Eventually(t, time.Minute, "end offsets of "+topic, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		l, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = l.Error()
		}
		if err != nil {
			return err
		}
		out = map[int32]int64{}
		l.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
		if len(out) != partitions {
			return fmt.Errorf("end offsets of %d partitions", len(out))
		}
		return nil
	})
	return out
}

// readLog reads every partition of topic from its start up to until(p)
// says it is done, with a fresh consumer of the given isolation level. It
// returns each partition's records by offset: a consumer that is reset or
// retried may be handed a record twice, which is a redelivery, not a
// duplicate in the log. Fetch errors are tolerated (a checker may run
// while leadership settles); the deadline is not.
func readLog(t *testing.T, tg *target, topic string, committed bool, done func(map[int32]map[int64]*kgo.Record) bool) (map[int32]map[int64]*kgo.Record, error) {
	t.Helper()
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	cl := tg.client("check-read",
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(iso),
		kgo.FetchMaxWait(300*time.Millisecond),
	)
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), readDeadline)
	defer cancel()
	out := map[int32]map[int64]*kgo.Record{}
	for p := range int32(partitions) {
		out[p] = map[int64]*kgo.Record{}
	}
	var errs errCounts
	for !done(out) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			got := map[int32]int{}
			for p, rs := range out {
				got[p] = len(rs)
			}
			return out, fmt.Errorf("reading %s (read_committed=%v) timed out after %v; records per partition %v; fetch errors: %s",
				topic, committed, readDeadline, got, errs.String())
		}
		fs.EachError(func(_ string, _ int32, err error) { errs.add(err) })
		fs.EachRecord(func(r *kgo.Record) { out[r.Partition][r.Offset] = r })
	}
	return out, nil
}

// readToEnd reads topic up to the end offsets listed when it is called.
func readToEnd(t *testing.T, tg *target, topic string) (map[int32]map[int64]*kgo.Record, error) {
	t.Helper()
	end := endOffsets(t, tg, topic)
	return readLog(t, tg, topic, false, func(got map[int32]map[int64]*kgo.Record) bool {
		for p, e := range end {
			if e > 0 && got[p][e-1] == nil {
				return false
			}
		}
		return true
	})
}

// checkAcked checks a producer's acknowledgements against the log: every
// acknowledged record is at the offset it was acknowledged at, with its
// value; offsets are dense from 0 (no transactions write to these topics).
// For an idempotent producer, also: no record is in the log twice, and each
// partition holds its records in the order they were produced.
func checkAcked(t *testing.T, tg *target, p *producer) *verdict {
	t.Helper()
	v := &verdict{check: p.name + ": every acknowledged record at its offset with its value"}
	if p.idempotent {
		v.check += ", exactly once, in order"
	}
	acks := p.snapshot() // before reading: every one of these is below the end offsets
	log, err := readToEnd(t, tg, p.topic)
	if err != nil {
		v.bad.add("reading the log back: %v", err)
		return v
	}
	stored := 0
	for part, recs := range log {
		offs := make([]int64, 0, len(recs))
		for o := range recs {
			offs = append(offs, o)
		}
		sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
		stored += len(offs)
		for i, o := range offs {
			if o != int64(i) {
				v.bad.add("partition %d: offset %d where %d should be (offsets must be dense from 0)", part, o, i)
				break
			}
		}
		if !p.idempotent {
			continue
		}
		seen := map[int]int64{}
		prev := -1
		for _, o := range offs {
			val := string(recs[o].Value)
			seq, ok := parseSeq(val, p.prefix, part)
			if !ok {
				v.bad.add("partition %d offset %d: value %.60q is not one this producer writes to this partition", part, o, val)
				continue
			}
			if first, dup := seen[seq]; dup {
				v.bad.add("DUPLICATE: partition %d: record %d at offsets %d and %d", part, seq, first, o)
				continue
			}
			seen[seq] = o
			if seq < prev {
				v.bad.add("ORDER: partition %d offset %d: record %d after record %d", part, o, seq, prev)
			}
			prev = max(prev, seq)
		}
	}
	lost, changed := 0, 0
	at := map[[2]int64]string{}
	for _, a := range acks {
		key := [2]int64{int64(a.partition), a.offset}
		if other, twice := at[key]; twice {
			v.bad.add("partition %d offset %d acknowledged for two records: %.40q and %.40q", a.partition, a.offset, other, a.value)
		}
		at[key] = a.value
		r := log[a.partition][a.offset]
		switch {
		case r == nil:
			lost++
			v.bad.add("LOST: acknowledged record %.40q at partition %d offset %d is not in the log", a.value, a.partition, a.offset)
		case string(r.Value) != a.value:
			changed++
			v.bad.add("CHANGED: partition %d offset %d was acknowledged for %.40q but holds %.40q", a.partition, a.offset, a.value, r.Value)
		}
	}
	v.ok = fmt.Sprintf("%d acknowledged records in place, %d records stored", len(acks), stored)
	if lost+changed > 0 {
		v.bad.add("in all: %d of %d acknowledged records lost, %d changed", lost, len(acks), changed)
	}
	return v
}

// parseSeq reads the sequence number out of "<prefix><partition>-<seq>-<pad>".
func parseSeq(v, prefix string, part int32) (int, bool) {
	rest, ok := strings.CutPrefix(v, fmt.Sprintf("%s%d-", prefix, part))
	if !ok {
		return 0, false
	}
	s, _, _ := strings.Cut(rest, "-")
	n, err := strconv.Atoi(s)
	return n, err == nil
}

// sentinelPrefix marks the records checkTxn writes to find the end of what
// it must see.
const sentinelPrefix = "sentinel-"

// checkTxn reads the transactional topic as a read_committed consumer and
// checks every transaction ended before the read: a committed one has all
// its records visible exactly once, an aborted one none, and one whose
// commit outcome the producer could not know all or none.
//
// To know where to stop, it first appends a non-transactional sentinel to
// every partition and reads until it has seen them all. A read_committed
// consumer reaches a sentinel only once every transaction that wrote below
// it is decided, so every transaction ended before the sentinels were
// written is fully visible or fully hidden by then, even if its markers
// were written after its EndTransaction returned.
func checkTxn(t *testing.T, tg *target, p *txnProducer) *verdict {
	t.Helper()
	v := &verdict{check: "txn: every committed record visible once under read_committed, no aborted one"}
	txns := p.snapshot()
	mark := fmt.Sprintf("%s%d", sentinelPrefix, time.Now().UnixNano())
	cl := tg.client("check-sentinel", kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	for part := range int32(partitions) {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: txnTopic, Partition: part, Value: []byte(mark)}).FirstErr(); err != nil {
			cancel()
			cl.Close()
			v.bad.add("producing the end sentinel to partition %d: %v", part, err)
			return v
		}
	}
	cancel()
	cl.Close()
	log, err := readLog(t, tg, txnTopic, true, func(got map[int32]map[int64]*kgo.Record) bool {
		for part := range int32(partitions) {
			found := false
			for _, r := range got[part] {
				if string(r.Value) == mark {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	})
	if err != nil {
		v.bad.add("reading read_committed to the sentinels: %v (a transaction left open holds the last stable offset back)", err)
		return v
	}
	visible := map[int]map[int]int{} // txn -> record -> times seen
	bad := &v.bad
	for part, recs := range log {
		for o, r := range recs {
			v := string(r.Value)
			if strings.HasPrefix(v, sentinelPrefix) {
				continue
			}
			var seq, i int
			if _, err := fmt.Sscanf(v, "t%d-%d", &seq, &i); err != nil {
				bad.add("partition %d offset %d: unexpected value %.60q", part, o, v)
				continue
			}
			if visible[seq] == nil {
				visible[seq] = map[int]int{}
			}
			visible[seq][i]++
		}
	}
	counts := map[txnOutcome]int{}
	for seq, e := range txns {
		seen := visible[seq]
		n := 0
		for i, c := range seen {
			n++
			if c > 1 {
				bad.add("DUPLICATE: transaction %d record %d visible %d times", seq, i, c)
			}
			if i >= e.records {
				bad.add("transaction %d: record %d visible, but it wrote %d", seq, i, e.records)
			}
		}
		counts[e.outcome]++
		switch e.outcome {
		case txnCommitted:
			if n != e.records {
				bad.add("COMMITTED MISSING: transaction %d committed %d records but %d are visible under read_committed", seq, e.records, n)
			}
		case txnAborted:
			if n > 0 {
				bad.add("ABORTED VISIBLE: transaction %d was aborted (%s) but %d of its %d records are visible under read_committed", seq, e.why, n, e.records)
			}
		case txnUnknown:
			if n != 0 && n != e.records {
				bad.add("NOT ATOMIC: transaction %d (commit outcome unknown: %s): %d of its %d records visible", seq, e.why, n, e.records)
			}
		}
	}
	v.ok = fmt.Sprintf("%d committed, %d aborted, %d of unknown outcome, %d still open",
		counts[txnCommitted], counts[txnAborted], counts[txnUnknown], counts[txnOpen])
	return v
}

// checkGroupOffsets asks the group coordinator for the group's committed
// offsets (OffsetFetch) and checks each is at least the last offset a
// commit was acknowledged for. Retriable errors are waited out.
func checkGroupOffsets(t *testing.T, tg *target, g *groupConsumer) *verdict {
	t.Helper()
	v := &verdict{check: "group offsets: OffsetFetch returns at least every acknowledged commit"}
	cl := tg.client("check-group")
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var want map[int32]int64
	var got kadm.OffsetResponses
	deadline := time.Now().Add(2 * time.Minute)
	for {
		want = g.snapshot() // before the fetch: a later commit only raises what is fetched
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		var err error
		got, err = adm.FetchOffsets(ctx, groupName)
		cancel()
		if err == nil {
			err = got.Error()
		}
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			v.bad.add("OffsetFetch still failing after 2 minutes: %v", err)
			return v
		}
		time.Sleep(200 * time.Millisecond)
	}
	bad := &v.bad
	for p, off := range want {
		r, ok := got.Lookup(idemTopic, p)
		switch {
		case !ok:
			bad.add("LOST: partition %d: a commit of offset %d was acknowledged, but OffsetFetch returns nothing for it", p, off)
		case r.At < off:
			bad.add("LOST: partition %d: a commit of offset %d was acknowledged, but OffsetFetch returns %d", p, off, r.At)
		}
	}
	g.mu.Lock()
	if g.regressed.total > 0 {
		for _, s := range g.regressed.list {
			bad.add("%s", s)
		}
	}
	g.mu.Unlock()
	v.ok = fmt.Sprintf("fetched offsets cover the acknowledged commits %v", want)
	return v
}

// checkConsumed checks that the group was handed every record the
// idempotent producer had acknowledged.
func checkConsumed(g *groupConsumer, p *producer) *verdict {
	v := &verdict{check: "group consumed every acknowledged record"}
	bad := &v.bad
	acks := p.snapshot()
	g.mu.Lock()
	for _, a := range acks {
		if !g.seen[a.value] {
			bad.add("partition %d offset %d (%.30q) acknowledged but never consumed by the group", a.partition, a.offset, a.value)
		}
	}
	v.ok = fmt.Sprintf("all %d acknowledged records of %s handed to the group (%d distinct values)", len(acks), p.topic, len(g.seen))
	g.mu.Unlock()
	return v
}
