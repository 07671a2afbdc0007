package bench

import (
	"fmt"
	"log/slog"
	"os"
	"runtime/pprof"
	"runtime/trace"

	"github.com/spf13/cobra"
)

// Command returns `sluice bench`, for cmd/sluice to mount.
func Command() *cobra.Command {
	cfg := DefaultConfig()
	var verbose bool
	var cpuProfile, traceFile string
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Produce and consume a fixed workload and report throughput and latency",
		Long: `bench produces --records values of --size random bytes over --partitions
partitions with franz-go, then consumes them back from where it began, and
reports produce and consume records/s and MB/s (10^6 bytes of values per
second), per-record produce latency (Produce call to promise), CPU time
and the total elapsed time.

--target kfake runs against franz-go's in-memory fake broker started inside
this process; --target kfake-process runs it in a child process instead,
so that it and the clients are separate processes as a real broker and its
clients are. --compare runs against --brokers and then both kfakes and
prints the ratios of the brokers run to each. --disk-bw DIR also measures the disk's direct-write
bandwidth, like scripts/diskbw.sh, so the figures come from the same run.

--topics N spreads the workload over N topics (<topic>-0 .. <topic>-(N-1)),
each of --partitions partitions; every record goes to a random topic.

CPU: each phase reports the driver's own CPU time (client_cpu_s, and per
record) and, when the broker's PID is known, the broker's (server_cpu_s),
read from /proc/PID/stat on Linux. Give it with --server-pid for --brokers on
this machine; the child-process kfake's is taken automatically. In-process
kfake runs inside the driver, so its CPU is in the client figure.`,
		Example: `  sluice bench --brokers 127.0.0.1:9092 --records 1000000 --size 100
  sluice bench --rate 50 --acks all --json         # latency at 50 MB/s
  sluice bench --compare --partitions 8 --producers 2
  sluice bench --target kfake --records 200000
  sluice bench --server-pid 4242 --topics 100 --partitions 10 --partitioner random
  sluice bench --disk-bw /var/lib/sluice --records 0`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			level := slog.LevelWarn
			if verbose {
				level = slog.LevelInfo
			}
			logger := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: level}))
			if cpuProfile != "" {
				f, err := os.Create(cpuProfile)
				if err != nil {
					return fmt.Errorf("cpuprofile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("cpuprofile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			if traceFile != "" {
				f, err := os.Create(traceFile)
				if err != nil {
					return fmt.Errorf("trace: %w", err)
				}
				defer f.Close()
				if err := trace.Start(f); err != nil {
					return fmt.Errorf("trace: %w", err)
				}
				defer trace.Stop()
			}
			res, err := Run(cmd.Context(), cfg, logger)
			if res != nil {
				var werr error
				if cfg.JSON {
					werr = res.WriteJSON(cmd.OutOrStdout())
				} else {
					werr = res.WriteText(cmd.OutOrStdout())
				}
				if err == nil {
					err = werr
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringSliceVar(&cfg.Brokers, "brokers", cfg.Brokers, "seed brokers, comma separated")
	f.StringVar(&cfg.Target, "target", cfg.Target, `"brokers" (the --brokers), "kfake" (in-process fake cluster) or "kfake-process" (kfake in a child process)`)
	f.BoolVar(&cfg.Compare, "compare", cfg.Compare, "run against --brokers and then both kfakes; print all three and the ratios")
	f.StringVar(&cfg.Topic, "topic", cfg.Topic, "topic (with --topics N, the prefix); default a new bench-<unix nanos>, created and then deleted")
	f.BoolVar(&cfg.KeepTopic, "keep-topic", cfg.KeepTopic, "do not delete the topics the run created")
	f.IntVar(&cfg.Topics, "topics", cfg.Topics, "topics to spread the records over, named <topic>-0 .. <topic>-(N-1) when N > 1")
	f.IntVar(&cfg.ServerPID, "server-pid", cfg.ServerPID, "PID of the broker on this machine, to report its CPU time per phase (Linux; --target brokers)")
	f.Int64Var(&cfg.Records, "records", cfg.Records, "records to produce and consume (0: only --disk-bw)")
	f.IntVar(&cfg.Size, "size", cfg.Size, "bytes per record value")
	f.StringVar(&cfg.Partitioner, "partitioner", "sticky", "sticky (kgo's default: one partition per batch) or random (a random partition per record, as a producer keyed over many partitions)")
	f.StringVar(&cfg.Values, "values", ValuesRandom, "record values: random (incompressible) or text (JSON-like log lines, about 3-4x compressible)")
	f.Int32Var(&cfg.Partitions, "partitions", cfg.Partitions, "partitions of each created topic")
	f.Int16Var(&cfg.Replication, "replication", cfg.Replication, "replication factor of the created topic (-1: broker default)")
	f.StringVar(&cfg.Acks, "acks", cfg.Acks, "all, 1 or 0 (1 and 0 turn idempotence off)")
	f.BoolVar(&cfg.Idempotent, "idempotent", cfg.Idempotent, "idempotent producer, as kgo defaults (needs --acks all)")
	f.StringVar(&cfg.Compression, "compression", cfg.Compression, "none, gzip, snappy, lz4 or zstd")
	f.IntVar(&cfg.Producers, "producers", cfg.Producers, "producer clients, each sending an equal share")
	f.DurationVar(&cfg.Linger, "linger", cfg.Linger, "producer linger (0: kgo default, none)")
	f.DurationVar(&cfg.Delay, "delay", cfg.Delay, "ask the broker to hold every record this long (header sluice-delay-ms); produce figures only, no consume phase")
	f.IntVar(&cfg.MaxInflight, "max-inflight", cfg.MaxInflight, "produce requests in flight per broker (0: kgo default; >1 needs --idempotent=false)")
	f.Int32Var(&cfg.BatchMaxBytes, "batch-max-bytes", cfg.BatchMaxBytes, "producer batch max bytes (0: kgo default)")
	f.IntVar(&cfg.MaxBuffered, "max-buffered-records", cfg.MaxBuffered, "records a producer buffers before Produce blocks (0: kgo default)")
	f.Float64Var(&cfg.RateMBps, "rate", cfg.RateMBps, "target produce rate in MB/s over all producers (0: as fast as possible)")
	f.DurationVar(&cfg.Timeout, "timeout", cfg.Timeout, "give up on the whole run after this long")
	f.DurationVar(&cfg.ConsumeTimeout, "consume-idle-timeout", cfg.ConsumeTimeout, "give up consuming after this long without a record")
	f.StringToStringVar(&cfg.TopicConfigs, "topic-config", nil, "configs of the topics the run creates, k=v,k=v (e.g. sluice.value.schema.validation=true)")
	f.BytesHexVar(&cfg.ValuePrefix, "value-prefix", nil, "hex bytes every value starts with, within --size (e.g. 0000000001: the schema registry's wire header for id 1)")
	f.BoolVar(&cfg.ProduceOnly, "produce-only", cfg.ProduceOnly, "produce, then stop: no consume phase (for profiling the write path)")
	f.BoolVar(&cfg.JSON, "json", cfg.JSON, "print the result as JSON")
	f.StringVar(&cfg.DiskBWDir, "disk-bw", cfg.DiskBWDir, "also measure direct-write bandwidth of the disk holding this directory")
	f.Int64Var(&cfg.DiskBWBytes, "disk-bw-size", cfg.DiskBWBytes, "bytes to write per --disk-bw mode")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the load driver to this file")
	f.StringVar(&traceFile, "trace", "", "write an execution trace of the load driver to this file (go tool trace)")
	f.BoolVarP(&verbose, "verbose", "v", false, "log progress to stderr")
	cmd.AddCommand(serveKfakeCommand())
	return cmd
}
