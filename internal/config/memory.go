package config

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
	"strings"
)

// The memory budget is one number from which every bounded consumer of
// memory in the broker is sized (docs/memory.md). A key set explicitly
// wins over its share; the rest follow the budget.

// Memory budget defaults.
const (
	// MinMemoryBudget is the least budget a broker runs with.
	MinMemoryBudget = 256 << 20
	// maxDerivedBudget caps the budget derived from the machine: past it
	// the shares stop paying for themselves (a 64 MiB WAL segment and
	// its peers are enough for any throughput measured).
	maxDerivedBudget = 16 << 30
	// maxWALSegment is the WAL segment size once the budget allows it.
	maxWALSegment = 64 << 20
	// minWALSegment keeps a small budget's segments worth rolling.
	minWALSegment = 4 << 20
	// walSegmentsInMemory is how many segments' data the broker can hold
	// unrolled: the one being written and the log's default pending
	// limit of four closed ones.
	walSegmentsInMemory = 5
	// kafkaFetchMaxBytes is Kafka's default broker fetch.max.bytes.
	kafkaFetchMaxBytes = 55 << 20
)

// MemoryPlan is what the budget gives each part of the broker, in bytes.
type MemoryPlan struct {
	// Budget is the whole: resident memory should stay within it plus
	// 10 %.
	Budget int64
	// Derived says the budget came from the machine's memory, not a key.
	Derived bool
	// HeapLimit is the Go runtime's soft memory limit (GOMEMLIMIT): near
	// it the collector runs more often, whatever gc_percent says.
	HeapLimit int64
	// QueuedRequestBytes bounds requests read and not yet answered.
	QueuedRequestBytes int64
	// FetchResponseBytes caps one Fetch response (fetch.max.bytes).
	FetchResponseBytes int64
	// DecompressBytes bounds decompressions in flight.
	DecompressBytes int64
	// WALSegmentBytes is the WAL segment size: unrolled data is in memory
	// until rolled, up to walSegmentsInMemory segments of it.
	WALSegmentBytes int64
	// AsyncBacklogBytes bounds appends waiting for the WAL writer.
	AsyncBacklogBytes int64
	// TailBytes bounds rolled data kept in memory for readers at the head.
	TailBytes int64
	// BlockCacheBytes is the object block cache.
	BlockCacheBytes int64
	// MergeBytes bounds the merge of small extents' buffer: one merged
	// object, built in memory (4-64 MiB).
	MergeBytes int64
	// CompactMapBytes bounds compaction's key map (4-128 MiB).
	CompactMapBytes int64
	// CompactObjectBytes bounds one object compaction writes, built in
	// memory (4-16 MiB).
	CompactObjectBytes int64
}

// Memory returns the plan for c on a machine with machineBytes of memory
// available to the process (see MachineMemory; 0: unknown). The budget is
// memory_budget_mb, or a quarter of the machine's memory (at least 256 MiB,
// at most 16 GiB). Of it:
//
//	heap limit          85 %  (the rest: stacks, the metadata store's
//	                           mapped pages, the runtime's own)
//	queued requests     1/8
//	one Fetch response  1/16  (at most Kafka's 55 MiB)
//	decompression       1/8   (at least 8 MiB)
//	unrolled WAL data   1/8   (5 segments of at most 64 MiB)
//	appends in flight   1/16
//	head tail           1/16
//	block cache         1/16
//	merged object       1/32  (4 to 64 MiB; with what reading its
//	                           inputs takes, at most 1/16)
//	compaction key map  1/32  (4 to 128 MiB: Kafka's default dedupe buffer)
//	compaction output   1/128 (4 to 16 MiB: with gc_percent 400 the
//	                           heap may grow to five times it)
//
// which leaves a fifth of the heap limit for everything per partition,
// per connection and in passing.
func (c *Config) Memory(machineBytes int64) MemoryPlan {
	p := MemoryPlan{Budget: c.MemoryBudgetMB << 20}
	if p.Budget <= 0 {
		p.Derived = true
		p.Budget = machineBytes / 4
		if machineBytes <= 0 {
			p.Budget = 2 << 30
		}
		p.Budget = min(max(p.Budget, MinMemoryBudget), maxDerivedBudget)
	}
	b := p.Budget
	p.HeapLimit = b / 100 * 85
	switch {
	case c.MemoryLimitMB > 0:
		p.HeapLimit = c.MemoryLimitMB << 20
	case c.MemoryLimitMB < 0:
		p.HeapLimit = 0 // none
	}
	p.QueuedRequestBytes = pick(c.QueuedMaxRequestBytes, b/8)
	p.FetchResponseBytes = pick(int64(c.FetchMaxBytes), min(kafkaFetchMaxBytes, b/16))
	p.DecompressBytes = pick(c.DecompressBudgetBytes, max(b/8, 8<<20))
	seg := min(max(b/8/walSegmentsInMemory, minWALSegment), maxWALSegment)
	p.WALSegmentBytes = pick(c.WALSegmentBytes, seg&^(1<<20-1))
	p.AsyncBacklogBytes = b / 16
	p.TailBytes = b / 16
	p.BlockCacheBytes = b / 16
	p.MergeBytes = min(max(b/32, 4<<20), 64<<20) &^ (1<<20 - 1)
	p.CompactMapBytes = pick(c.CleanerDedupeBufferBytes, min(max(b/32, 4<<20), 128<<20)&^(1<<20-1))
	p.CompactObjectBytes = min(max(b/128, 4<<20), 16<<20) &^ (1<<20 - 1)
	return p
}

// pick is an explicit setting when there is one (non-zero), else the share.
func pick(set, share int64) int64 {
	if set != 0 {
		return set
	}
	return share
}

// MachineMemory is the memory this process may use: the smaller of the
// machine's (/proc/meminfo MemTotal) and its cgroup's limit (v2
// memory.max, v1 memory.limit_in_bytes). 0 when neither can be read.
func MachineMemory() int64 {
	total := memTotal()
	for _, f := range []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n // "max" (no limit) does not parse
		}
	}
	return total
}

func memTotal() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
