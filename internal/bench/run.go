package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ErrIncomplete means a run finished but not every record made it: some
// produces failed, or fewer records were consumed than were produced. The
// Result is still returned and worth printing.
var ErrIncomplete = errors.New("bench: incomplete run")

// Run measures the disk if asked, then runs the workload against each target
// of cfg: the brokers or a kfake, or with cfg.Compare the brokers and then
// both kfakes. It returns what it
// measured even when it also returns an error.
func Run(ctx context.Context, cfg Config, logger *slog.Logger) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()

	res := &Result{}
	if cfg.DiskBWDir != "" {
		logger.Info("measuring disk bandwidth", "dir", cfg.DiskBWDir, "bytes", cfg.DiskBWBytes)
		res.Disk = MeasureDiskBW(ctx, cfg.DiskBWDir, cfg.DiskBWBytes)
	}
	if cfg.Records == 0 {
		return res, nil
	}

	pool := newValuePool(cfg.Size, uint64(time.Now().UnixNano()), cfg.Values).withPrefix(cfg.ValuePrefix)
	targets := []string{cfg.Target}
	if cfg.Compare {
		targets = append(targets, TargetKfake, TargetKfakeProcess)
	}
	var errs []error
	for _, target := range targets {
		rep, err := runTarget(ctx, cfg, target, pool, logger)
		if rep != nil {
			res.Runs = append(res.Runs, rep)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("target %s: %w", target, err))
			if ctx.Err() != nil {
				break
			}
		}
	}
	if cfg.Compare && len(res.Runs) > 0 && res.Runs[0].Target == TargetBrokers {
		for _, r := range res.Runs[1:] {
			res.Ratios = append(res.Ratios, newRatio(res.Runs[0], r))
		}
	}
	return res, errors.Join(errs...)
}

// runTarget starts a kfake if target asks for one, then runs the workload.
func runTarget(ctx context.Context, cfg Config, target string, pool *valuePool, logger *slog.Logger) (*Report, error) {
	brokers := cfg.Brokers
	var serverPID int // 0: the server's CPU is not measured
	switch target {
	case TargetBrokers:
		serverPID = cfg.ServerPID
		if serverPID > 0 {
			if _, err := processCPU(serverPID); err != nil {
				if runtime.GOOS == "linux" {
					return nil, fmt.Errorf("bench: --server-pid %d: %w", serverPID, err)
				}
				logger.Warn("no server CPU figures", "pid", serverPID, "err", err)
			}
		}
	case TargetKfake:
		// The fake runs in this process: its CPU is part of the client's.
		c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(cfg.Partitions)))
		if err != nil {
			return nil, fmt.Errorf("bench: start kfake: %w", err)
		}
		defer c.Close()
		brokers = c.ListenAddrs()
		logger.Info("started in-process kfake", "addrs", brokers)
	case TargetKfakeProcess:
		k, err := startKfakeProcess(ctx, cfg.KfakeCommand, cfg.Partitions)
		if err != nil {
			return nil, err
		}
		defer k.stop()
		brokers = []string{k.addr}
		serverPID = k.cmd.Process.Pid
		logger.Info("started kfake in a child process", "addr", k.addr, "pid", serverPID)
	}
	return runWorkload(ctx, cfg, target, brokers, cpuMeter{serverPID: serverPID}, pool, logger)
}

// topicPartition keys per-partition state: a run may cover 100,000
// partitions, so lookups must not scan.
type topicPartition struct {
	topic     string
	partition int32
}

// topicNames is the run's topics: base alone, or base-0 .. base-(n-1).
func topicNames(base string, n int) []string {
	if n == 1 {
		return []string{base}
	}
	names := make([]string, n)
	for i := range names {
		names[i] = base + "-" + strconv.Itoa(i)
	}
	return names
}

// runWorkload creates the topics, produces, consumes back what was produced
// and deletes the topics it created.
func runWorkload(ctx context.Context, cfg Config, target string, brokers []string, meter cpuMeter, pool *valuePool, logger *slog.Logger) (*Report, error) {
	t0 := time.Now()
	base := cfg.Topic
	if base == "" {
		base = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	topics := topicNames(base, cfg.Topics)
	rep := &Report{
		Target:      target,
		Brokers:     brokers,
		Topic:       base,
		Topics:      len(topics),
		Records:     cfg.Records,
		Size:        cfg.Size,
		Partitions:  cfg.Partitions,
		Acks:        cfg.Acks,
		Idempotent:  cfg.idempotent(),
		Compression: cfg.Compression,
		Producers:   cfg.Producers,
		Linger:      cfg.Linger,
		MaxInflight: cfg.MaxInflight,
		RateMBps:    cfg.RateMBps,
	}

	// A short metadata age: right after CreateTopics a cluster answers
	// LEADER_NOT_AVAILABLE until leaders are elected (milliseconds), and
	// kgo would otherwise serve that answer from its cache for 5 s.
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("bench: admin client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	created, err := createTopics(ctx, adm, topics, cfg.Partitions, cfg.Replication, cfg.TopicConfigs, logger)
	// A kfake is thrown away with its topics (and deleting 20,000
	// partitions from one takes it longer than the run).
	if len(created) > 0 && !cfg.KeepTopic && target == TargetBrokers {
		defer deleteTopics(adm, created, logger)
	}
	if err != nil {
		return nil, err
	}
	logger.Info("topics ready", "topics", len(topics), "created", len(created))

	// Offsets before and after producing bound exactly this run's records,
	// even in a --topic that already held data.
	t1 := time.Now()
	startOffs, err := endOffsets(ctx, adm, topics)
	if err != nil {
		return nil, err
	}
	logger.Info("listed end offsets", "partitions", len(startOffs), "took", time.Since(t1))
	logger.Info("producing", "records", cfg.Records, "size", cfg.Size, "producers", cfg.Producers)
	rep.Produce, err = produce(ctx, cfg, brokers, topics, meter, pool)
	if err != nil {
		return rep, fmt.Errorf("bench: produce: %w", err)
	}
	endOffs, err := endOffsets(ctx, adm, topics)
	if err != nil {
		return rep, err
	}
	inLog := recordsBetween(startOffs, endOffs)
	if cfg.ProduceOnly {
		rep.Elapsed = time.Since(t0)
		if rep.Produce.Errors > 0 {
			return rep, fmt.Errorf("%w: %d produce errors, first: %s", ErrIncomplete, rep.Produce.Errors, rep.Produce.FirstError)
		}
		return rep, nil
	}
	// acks=0 and acks=1 promises complete before the records are visible
	// to consumers (acks=0: once sent; acks=1: before they are durable), so
	// wait, briefly, for the end offsets to cover what was acknowledged.
	for deadline := time.Now().Add(10 * time.Second); inLog < rep.Produce.Records && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if endOffs, err = endOffsets(ctx, adm, topics); err != nil {
			return rep, err
		}
		inLog = recordsBetween(startOffs, endOffs)
	}
	if cfg.Delay > 0 {
		// The records are held by the broker: the partitions show only
		// the offsets reserved for them until they are due.
		rep.Elapsed = time.Since(t0)
		if rep.Produce.Errors > 0 {
			return rep, fmt.Errorf("%w: %d produce errors, first: %s", ErrIncomplete, rep.Produce.Errors, rep.Produce.FirstError)
		}
		return rep, nil
	}
	logger.Info("consuming", "records", inLog)
	rep.Consume, err = consume(ctx, cfg, brokers, meter, startOffs, endOffs)
	rep.Elapsed = time.Since(t0)
	if err != nil {
		return rep, fmt.Errorf("bench: consume: %w", err)
	}
	switch {
	case rep.Produce.Errors > 0:
		return rep, fmt.Errorf("%w: %d produce errors, first: %s", ErrIncomplete, rep.Produce.Errors, rep.Produce.FirstError)
	case rep.Consume.Records != rep.Produce.Records:
		return rep, fmt.Errorf("%w: produced %d records, consumed %d", ErrIncomplete, rep.Produce.Records, rep.Consume.Records)
	}
	return rep, nil
}

func recordsBetween(start, end map[topicPartition]int64) int64 {
	var n int64
	for tp, e := range end {
		n += e - start[tp]
	}
	return n
}

// topicsPerRequest bounds one CreateTopics or DeleteTopics request, so that
// 10,000 topics go in a few requests of a size any broker takes.
const topicsPerRequest = 1000

// createTopics creates topics, a chunk of them per request, and finds those
// already there. It returns the ones this run created, also on error, so
// that the caller can delete them.
func createTopics(ctx context.Context, adm *kadm.Client, topics []string, partitions int32, rf int16, configs map[string]string, logger *slog.Logger) ([]string, error) {
	var cfgs map[string]*string
	for k, v := range configs {
		if cfgs == nil {
			cfgs = map[string]*string{}
		}
		cfgs[k] = kadm.StringPtr(v)
	}
	var created []string
	for chunk := range slices.Chunk(topics, topicsPerRequest) {
		t0 := time.Now()
		resps, err := adm.CreateTopics(ctx, partitions, rf, cfgs, chunk...)
		if err != nil {
			return created, fmt.Errorf("bench: create %d topics from %s: %w", len(chunk), chunk[0], err)
		}
		var firstErr error
		for _, t := range chunk {
			resp, ok := resps[t]
			switch {
			case !ok:
				err = errors.New("not in the response")
			case resp.Err == nil:
				created = append(created, t)
				continue
			case errors.Is(resp.Err, kerr.TopicAlreadyExists):
				continue
			default:
				err = resp.Err
			}
			if firstErr == nil {
				firstErr = fmt.Errorf("bench: create topic %s: %w", t, err)
			}
		}
		if firstErr != nil {
			return created, firstErr
		}
		if len(topics) > topicsPerRequest {
			logger.Info("created topics", "first", chunk[0], "topics", len(chunk), "took", time.Since(t0))
		}
	}
	return created, nil
}

// deleteTopics deletes topics, a chunk per request, logging what fails.
func deleteTopics(adm *kadm.Client, topics []string, logger *slog.Logger) {
	for chunk := range slices.Chunk(topics, topicsPerRequest) {
		// The run's context may be spent; deleting must still happen.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t0 := time.Now()
		resps, err := adm.DeleteTopics(ctx, chunk...)
		cancel()
		if len(topics) > topicsPerRequest {
			logger.Info("deleted topics", "first", chunk[0], "topics", len(chunk), "took", time.Since(t0))
		}
		if err == nil {
			err = resps.Error()
		}
		if err != nil {
			logger.Warn("delete bench topics", "first", chunk[0], "topics", len(chunk), "err", err)
		}
	}
}

// endOffsets lists the end offset of every partition of every topic,
// retrying for a while: topics just created may not have leaders
// everywhere yet.
func endOffsets(ctx context.Context, adm *kadm.Client, topics []string) (map[topicPartition]int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed, err := adm.ListEndOffsets(ctx, topics...)
		if err == nil {
			err = listed.Error()
		}
		if err == nil {
			for _, t := range topics {
				if len(listed[t]) == 0 {
					err = fmt.Errorf("no partitions listed for %s", t)
					break
				}
			}
		}
		if err == nil {
			out := make(map[topicPartition]int64, len(topics)*len(listed[topics[0]]))
			listed.Each(func(o kadm.ListedOffset) { out[topicPartition{o.Topic, o.Partition}] = o.Offset })
			return out, nil
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: list end offsets of %d topics from %s: %w", len(topics), topics[0], err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
