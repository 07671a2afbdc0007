package batch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// recrc rewrites b's CRC after a change to the bytes it covers.
func recrc(b []byte) { binary.BigEndian.PutUint32(b[OffCRC:], ComputeCRC(b)) }

// mislabel marks an uncompressed batch as compressed with codec without
// compressing it: a payload that is not what its attributes say, under a
// correct CRC.
func mislabel(t testing.TB, b []byte, codec int8) []byte {
	b = append([]byte(nil), b...)
	binary.BigEndian.PutUint16(b[OffAttributes:], uint16(Attributes(b)|int16(codec)))
	recrc(b)
	return b
}

// bomb is a batch of one record holding n zero bytes, compressed with codec.
func bomb(t testing.TB, codec int8, n int) []byte {
	b, err := Build(codec, 1000, []kmsg.Record{{Key: []byte("k"), Value: make([]byte, n)}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidateMislabelledPayloadIsCorrupt(t *testing.T) {
	good := build(t, 0, 3)
	for codec := int8(1); codec <= 4; codec++ {
		t.Run(codecName(codec), func(t *testing.T) {
			d := NewDecompressor(0)
			lim := noLimits
			lim.Decompressor = d
			_, err := Validate(context.Background(), mislabel(t, good, codec), lim)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("got %v, want ErrCorrupt", err)
			}
			if st := d.Stats(); st.InUse != 0 || st.Corrupt != 1 {
				t.Fatalf("stats after refusal: %+v", st)
			}
		})
	}
}

func TestValidateTruncatedOrPaddedCompressedRecords(t *testing.T) {
	for codec := int8(1); codec <= 4; codec++ {
		t.Run(codecName(codec), func(t *testing.T) {
			// Claim one record more than the payload holds, and one less.
			for _, delta := range []int32{1, -1} {
				recs := make([]kmsg.Record, 5)
				for i := range recs {
					recs[i].Key, recs[i].Value = []byte{byte(i)}, []byte("v")
				}
				b, _ := Build(codec, 1000, recs)
				h, _ := ParseHeader(b)
				binary.BigEndian.PutUint32(b[OffRecordCount:], uint32(h.RecordCount+delta))
				binary.BigEndian.PutUint32(b[OffLastOffsetDelta:], uint32(h.LastOffsetDelta+delta))
				recrc(b)
				if _, err := Validate(context.Background(), b, noLimits); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("count %+d: got %v, want ErrCorrupt", delta, err)
				}
			}
		})
	}
}

// TestValidateBombs: a batch that decompresses to more than its limit is
// refused without the broker holding the output: allocation during the
// refusal stays far below the bomb's size.
func TestValidateBombs(t *testing.T) {
	const size = 48 << 20
	for codec := int8(1); codec <= 4; codec++ {
		t.Run(codecName(codec), func(t *testing.T) {
			b := bomb(t, codec, size)
			d := NewDecompressor(0)
			lim := noLimits
			lim.Decompressor, lim.MaxDecompressedBytes = d, 8<<20
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, err := Validate(context.Background(), b, lim)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("%d byte batch: got %v, want ErrTooLarge", len(b), err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 20<<20 {
				t.Fatalf("refusing a %d MiB bomb allocated %d MiB", size>>20, alloc>>20)
			}
			// The same bomb decoded whole (time index, compaction) is
			// refused the same way.
			runtime.ReadMemStats(&before)
			_, err = d.Records(context.Background(), b, 8<<20)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Records: got %v, want ErrTooLarge", err)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 20<<20 {
				t.Fatalf("Records refusing a %d MiB bomb allocated %d MiB", size>>20, alloc>>20)
			}
			if st := d.Stats(); st.InUse != 0 || st.Refused < 2 {
				t.Fatalf("stats: %+v", st)
			}
			// Under a higher limit, the same batch is taken and decodes.
			lim.MaxDecompressedBytes = size + 1024
			if _, err := Validate(context.Background(), b, lim); err != nil {
				t.Fatalf("under a %d byte limit: %v", lim.MaxDecompressedBytes, err)
			}
			x, err := d.Records(context.Background(), b, size+1024)
			if err != nil || len(x.Records) != 1 || len(x.Records[0].Value) != size {
				t.Fatalf("decode under the limit: %v", err)
			}
			if d.Stats().InUse < size {
				t.Fatal("a decoded batch's bytes are not charged to the budget")
			}
			x.Release()
			if st := d.Stats(); st.InUse != 0 {
				t.Fatalf("%d bytes held after Release", st.InUse)
			}
		})
	}
}

// TestValidateLargeRecords walks records larger than the stream buffer
// field by field, and catches a bad one among them.
func TestValidateLargeRecords(t *testing.T) {
	for codec := int8(1); codec <= 4; codec++ {
		t.Run(codecName(codec), func(t *testing.T) {
			recs := []kmsg.Record{
				{Key: bytes.Repeat([]byte("k"), 100<<10), Value: bytes.Repeat([]byte("v"), 300<<10),
					Headers: []kmsg.Header{{Key: "h", Value: bytes.Repeat([]byte("x"), 70<<10)}}},
				{Key: []byte("small"), Value: []byte("v")},
				{Value: bytes.Repeat([]byte("z"), 90<<10)}, // keyless
			}
			b, err := Build(codec, 1000, recs)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Validate(context.Background(), b, noLimits); err != nil {
				t.Fatal(err)
			}
			lim := noLimits
			lim.RequireKey, lim.Partition = true, func() string { return "t-0" }
			_, err = Validate(context.Background(), b, lim)
			var re *RecordErrors
			if !errors.As(err, &re) || len(re.Records) != 1 || re.Records[0].Index != 2 || !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("got %v, want one record error at index 2", err)
			}
		})
	}
}

// TestValidateRecordErrors is librdkafka's 0011 case: a compacted topic's
// batch with keyless records is refused whole, naming every keyless record.
func TestValidateRecordErrors(t *testing.T) {
	for codec := int8(0); codec <= 4; codec++ {
		t.Run(codecName(codec), func(t *testing.T) {
			recs := make([]kmsg.Record, 100)
			for i := range recs {
				recs[i].Value = fmt.Appendf(nil, "message %d", i)
				if i%10 != 0 {
					recs[i].Key = recs[i].Value
				}
			}
			b, _ := Build(codec, 1000, recs)
			lim := noLimits
			lim.RequireKey, lim.Partition = true, func() string { return "compacted-0" }
			_, err := Validate(context.Background(), b, lim)
			var re *RecordErrors
			if !errors.As(err, &re) || !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("got %v", err)
			}
			if len(re.Records) != 10 {
				t.Fatalf("%d record errors, want 10", len(re.Records))
			}
			for i, r := range re.Records {
				if r.Index != int32(i*10) || r.Message != "Compacted topic cannot accept message without key in topic partition compacted-0." {
					t.Fatalf("record error %d: %+v", i, r)
				}
			}
			// Timestamps out of range: INVALID_TIMESTAMP, naming the records.
			for i := range recs {
				recs[i].Key = []byte("k")
				recs[i].TimestampDelta64 = 0
			}
			recs[3].TimestampDelta64 = -500
			b, _ = Build(codec, 1000, recs)
			lim = noLimits
			lim.Now, lim.BeforeMaxMs = 1000, 100
			_, err = Validate(context.Background(), b, lim)
			if !errors.As(err, &re) || !errors.Is(err, ErrInvalidTimestamp) || len(re.Records) != 1 || re.Records[0].Index != 3 {
				t.Fatalf("timestamps: got %v", err)
			}
		})
	}
}

// TestDecompressorBudget: concurrent whole decodes never hold more than the
// budget, and each waits rather than fails while the budget is spent.
func TestDecompressorBudget(t *testing.T) {
	const budget = 16 << 20
	d := NewDecompressor(budget)
	var batches [][]byte
	for codec := int8(1); codec <= 4; codec++ {
		batches = append(batches, bomb(t, codec, 5<<20))
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	var peak sync.Mutex
	maxSeen := int64(0)
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				x, err := d.Records(context.Background(), batches[(g+i)%len(batches)], 6<<20)
				if err != nil {
					errs <- err
					return
				}
				peak.Lock()
				maxSeen = max(maxSeen, d.Stats().InUse)
				peak.Unlock()
				x.Release()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if maxSeen > budget || d.Stats().InUse != 0 {
		t.Fatalf("peak %d bytes held (budget %d), %d after", maxSeen, budget, d.Stats().InUse)
	}
	// A batch whose limit exceeds the whole budget cannot wait its turn.
	if _, err := d.Records(context.Background(), bomb(t, 4, 20<<20), 32<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over budget: got %v", err)
	}
}

func TestDecompressedLimit(t *testing.T) {
	for _, tc := range []struct {
		mmb    int32
		budget int64
		want   int64
	}{
		{1048588, 256 << 20, 1048588 * 32},
		{1000, 256 << 20, MinDecompressedLimit},
		{0, 256 << 20, MinDecompressedLimit},
		{100 << 20, 256 << 20, 256 << 20},
		{math.MaxInt32, 64 << 20, 64 << 20},
	} {
		if got := DecompressedLimit(tc.mmb, DefaultDecompressRatio, tc.budget); got != tc.want {
			t.Errorf("DecompressedLimit(%d, %d) = %d, want %d", tc.mmb, tc.budget, got, tc.want)
		}
	}
}
