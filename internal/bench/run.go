package bench

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
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

	pool := newValuePool(cfg.Size, uint64(time.Now().UnixNano()), cfg.Values)
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
	switch target {
	case TargetKfake:
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
		logger.Info("started kfake in a child process", "addr", k.addr, "pid", k.cmd.Process.Pid)
	}
	return runWorkload(ctx, cfg, target, brokers, pool, logger)
}

// runWorkload creates the topic, produces, consumes back what was produced
// and deletes the topic if it created it.
func runWorkload(ctx context.Context, cfg Config, target string, brokers []string, pool *valuePool, logger *slog.Logger) (*Report, error) {
	t0 := time.Now()
	topic := cfg.Topic
	if topic == "" {
		topic = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	rep := &Report{
		Target:      target,
		Brokers:     brokers,
		Topic:       topic,
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

	// A short metadata age: right after CreateTopic a cluster answers
	// LEADER_NOT_AVAILABLE until leaders are elected (milliseconds), and
	// kgo would otherwise serve that answer from its cache for 5 s.
	admCl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.MetadataMinAge(100*time.Millisecond))
	if err != nil {
		return nil, fmt.Errorf("bench: admin client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	created, err := createTopic(ctx, adm, topic, cfg.Partitions, cfg.Replication)
	if err != nil {
		return nil, err
	}
	if created && !cfg.KeepTopic {
		defer func() {
			// The run's context may be spent; deleting must still happen.
			dctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
			defer cancel()
			if _, err := adm.DeleteTopic(dctx, topic); err != nil {
				logger.Warn("delete bench topic", "topic", topic, "err", err)
			}
		}()
	}
	logger.Info("topic ready", "topic", topic, "created", created)

	// Offsets before and after producing bound exactly this run's records,
	// even in a --topic that already held data.
	startOffs, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return nil, err
	}
	logger.Info("producing", "records", cfg.Records, "size", cfg.Size, "producers", cfg.Producers)
	rep.Produce, err = produce(ctx, cfg, brokers, topic, pool)
	if err != nil {
		return rep, fmt.Errorf("bench: produce: %w", err)
	}
	endOffs, err := endOffsets(ctx, adm, topic)
	if err != nil {
		return rep, err
	}
	var inLog int64
	for p, e := range endOffs {
		inLog += e - startOffs[p]
	}
	// acks=0 and acks=1 promises complete before the records are visible
	// to consumers (acks=0: once sent; acks=1: before they are durable), so
	// wait, briefly, for the end offsets to cover what was acknowledged.
	for deadline := time.Now().Add(10 * time.Second); inLog < rep.Produce.Records && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
		if endOffs, err = endOffsets(ctx, adm, topic); err != nil {
			return rep, err
		}
		inLog = 0
		for p, e := range endOffs {
			inLog += e - startOffs[p]
		}
	}
	logger.Info("consuming", "records", inLog)
	rep.Consume, err = consume(ctx, cfg, brokers, topic, startOffs, endOffs)
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

// createTopic creates topic, or finds it already there. It reports whether
// this run created it.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32, rf int16) (bool, error) {
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err == nil {
		err = resp.Err
	}
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, kerr.TopicAlreadyExists):
		return false, nil
	}
	return false, fmt.Errorf("bench: create topic %s: %w", topic, err)
}

// endOffsets lists the end offset of every partition of topic, retrying for
// a while: a topic just created may not have leaders everywhere yet.
func endOffsets(ctx context.Context, adm *kadm.Client, topic string) (map[int32]int64, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		listed, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = listed.Error()
		}
		if err == nil {
			out := make(map[int32]int64)
			listed.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
			if len(out) > 0 {
				return out, nil
			}
			err = fmt.Errorf("no partitions listed")
		}
		if ctx.Err() != nil || time.Now().After(deadline) {
			return nil, fmt.Errorf("bench: list end offsets of %s: %w", topic, err)
		}
		if err := sleepCtx(ctx, 100*time.Millisecond); err != nil {
			return nil, err
		}
	}
}
