package log

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

// benchBatch is a ~16 KiB produce payload of records of recSize bytes.
func benchBatch(b *testing.B, recSize int, codec int8) []byte {
	n := max(1, 16<<10/recSize)
	recs := make([]kmsg.Record, n)
	for i := range recs {
		v := make([]byte, recSize)
		for j := range v {
			v[j] = byte(i*7 + j%13)
		}
		recs[i].Key = fmt.Appendf(nil, "key-%d", i%100)
		recs[i].Value = v
	}
	bt, err := batch.Build(codec, time.Now().UnixMilli(), recs)
	if err != nil {
		b.Fatal(err)
	}
	return bt
}

func benchEngine(b *testing.B, mut func(*Config)) (*Engine, *env) {
	v := newEnv(b)
	v.clk = nil
	v.cfg = func(c *Config) {
		c.Now = time.Now
		if mut != nil {
			mut(c)
		}
	}
	return v.open(), v
}

// BenchmarkAppend measures the produce path: validation, offset
// assignment, one copy into the WAL buffer, group commit, and (in the
// background) rolling into objects. Parallel cases model many producers.
func BenchmarkAppend(b *testing.B) {
	for _, recSize := range []int{100, 1024} {
		for _, tc := range []struct {
			name     string
			acks     int16
			parallel bool
			flush    FlushMode
		}{
			{"acks1", 1, false, FlushEveryBatch},
			{"acks-1", -1, false, FlushEveryBatch},
			{"acks-1-parallel", -1, true, FlushEveryBatch},
			{"acks-1-parallel-flushOS", -1, true, FlushOS},
		} {
			b.Run(fmt.Sprintf("rec=%dB/%s", recSize, tc.name), func(b *testing.B) {
				e, _ := benchEngine(b, func(c *Config) { c.Flush = tc.flush })
				e.CreateTopic(context.Background(), "bench", 16, map[string]string{"retention.ms": "-1"})
				payload := benchBatch(b, recSize, 0)
				b.SetBytes(int64(len(payload)))
				b.ReportAllocs()
				lat := make([]time.Duration, 0, b.N)
				var latMu sync.Mutex
				b.ResetTimer()
				if !tc.parallel {
					p, _ := e.Partition("bench", 0)
					for i := 0; i < b.N; i++ {
						start := time.Now()
						if _, err := p.Append(context.Background(), payload, tc.acks); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(start))
					}
				} else {
					var next int32
					var mu sync.Mutex
					b.SetParallelism(8)
					b.RunParallel(func(pb *testing.PB) {
						mu.Lock()
						p, _ := e.Partition("bench", next%16)
						next++
						mu.Unlock()
						var mine []time.Duration
						for pb.Next() {
							start := time.Now()
							if _, err := p.Append(context.Background(), payload, tc.acks); err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(start))
						}
						latMu.Lock()
						lat = append(lat, mine...)
						latMu.Unlock()
					})
				}
				b.StopTimer()
				reportLatency(b, lat)
				b.ReportMetric(float64(b.N)*float64(len(payload))/float64(recSize)/b.Elapsed().Seconds(), "records/s")
			})
		}
	}
}

func reportLatency(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	q := func(f float64) float64 { return float64(lat[int(f*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// BenchmarkRead measures sequential consumption, from the in-memory tail
// and from objects (block cache warm after the first pass), with Read
// (read_uncommitted) and ReadCommitted (read_committed, no transaction
// open: the cost of computing the LSO and clipping to it).
func BenchmarkRead(b *testing.B) {
	for _, name := range []string{"tail", "objects", "tail-committed", "objects-committed"} {
		src, committed := strings.CutSuffix(name, "-committed")
		b.Run(name, func(b *testing.B) {
			e, _ := benchEngine(b, func(c *Config) {
				c.Flush = FlushOS
				if src == "objects" {
					c.TailBytesPerPartition = -1 // keep nothing rolled in memory
				}
			})
			e.CreateTopic(context.Background(), "bench", 1, map[string]string{"retention.ms": "-1"})
			p, _ := e.Partition("bench", 0)
			payload := benchBatch(b, 1024, 0)
			for i := 0; i < 1024; i++ { // 16 MiB
				if _, err := p.Append(context.Background(), payload, -1); err != nil {
					b.Fatal(err)
				}
			}
			if src == "objects" {
				if err := e.forceRoll(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
			hw := p.HighWatermark()
			b.ReportAllocs()
			b.ResetTimer()
			var bytes int64
			off := int64(0)
			for i := 0; i < b.N; i++ {
				if off >= hw {
					off = 0
				}
				read := p.Read
				if committed {
					read = p.ReadCommitted
				}
				r, err := read(context.Background(), off, 1<<20, true)
				if err != nil || len(r.Records) == 0 {
					b.Fatal(err)
				}
				bytes += int64(len(r.Records))
				// Skip to the end of the last batch returned.
				last := r.Records
				for len(last) > 0 {
					n, _ := batch.Size(last)
					if n == len(last) {
						off = batch.LastOffset(last) + 1
					}
					last = last[n:]
				}
			}
			b.SetBytes(bytes / int64(b.N))
		})
	}
}

// BenchmarkAppendProducerCheck measures what the idempotent producer check
// adds to an append: both cases rewrite the batch's sequence and recompute
// its CRC before every append (a new batch each time), with or without a
// producer id, so their difference is the check and the state update.
func BenchmarkAppendProducerCheck(b *testing.B) {
	for _, idem := range []bool{false, true} {
		b.Run(fmt.Sprintf("idempotent=%v", idem), func(b *testing.B) {
			e, _ := benchEngine(b, func(c *Config) { c.Flush = FlushOS })
			e.CreateTopic(context.Background(), "bench", 1, map[string]string{"retention.ms": "-1"})
			p, _ := e.Partition("bench", 0)
			payload := benchBatch(b, 100, 0)
			n := int32(binary.BigEndian.Uint32(payload[batch.OffLastOffsetDelta:])) + 1
			pid := int64(-1)
			if idem {
				pid = 42
			}
			binary.BigEndian.PutUint64(payload[batch.OffProducerID:], uint64(pid))
			binary.BigEndian.PutUint16(payload[batch.OffProducerEpoch:], 0)
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				seq := int32(-1)
				if idem {
					seq = int32(i) * n
				}
				binary.BigEndian.PutUint32(payload[batch.OffBaseSequence:], uint32(seq))
				binary.BigEndian.PutUint32(payload[batch.OffCRC:], batch.ComputeCRC(payload))
				if _, err := p.Append(context.Background(), payload, 1); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkProducerState is the check and update alone, on a partition
// with 1000 producers.
func BenchmarkProducerState(b *testing.B) {
	ps := producers{}
	for id := int64(0); id < 1000; id++ {
		a := producerAppend{id: id, firstSeq: 0, lastSeq: 9}
		ps.record(&a, producerBatch{firstSeq: 0, lastSeq: 9})
	}
	seqs := make([]int32, 1000)
	for i := range seqs {
		seqs[i] = 10
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		id := int64(i % 1000)
		a := producerAppend{id: id, firstSeq: seqs[id], lastSeq: seqs[id] + 9}
		if dup, err := ps.check(&a); dup != nil || err != nil {
			b.Fatal(dup, err)
		}
		ps.record(&a, producerBatch{firstSeq: a.firstSeq, lastSeq: a.lastSeq, base: int64(i), last: int64(i)})
		seqs[id] += 10
	}
}
