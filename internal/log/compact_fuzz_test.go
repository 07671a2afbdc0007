package log

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCompactCorruptObject: compaction of a partition whose object was
// damaged on disk (batch framing, headers, records) never panics or loops:
// each pass ends with an error or cleans, in a map of 8 slots, and reads
// afterwards return data or an error. layout picks the object: one
// partition alone or two interleaved (read through the index).
func FuzzCompactCorruptObject(f *testing.F) {
	f.Add(uint8(0), uint32(8+29), []byte{0xff})         // first batch's base offset
	f.Add(uint8(0), uint32(8+29+8), []byte{0, 0, 0, 1}) // first batch's length
	f.Add(uint8(1), uint32(8+29+8), []byte{0x7f, 0xff}) // interleaved, length
	f.Add(uint8(0), uint32(200), []byte{0x55, 0x55, 0x55})
	f.Add(uint8(1), uint32(3<<30), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, layout uint8, at uint32, patch []byte) {
		if len(patch) == 0 || len(patch) > 64 {
			return
		}
		v := newEnv(t)
		v.cfg = func(c *Config) {
			c.TailBytesPerPartition = -1
			c.CompactMapBytes, c.CompactObjectBytes = 8*keySlotBytes, 1<<10
		}
		e := v.open()
		parts := int32(1 + layout%2)
		e.CreateTopic(bg, "t", parts, compactTopic)
		for i := range 12 {
			for part := range parts {
				p, _ := e.Partition("t", part)
				mustAppend(t, p, mkBatch(t, int8(i%3), v.clk.Now().UnixMilli(), 1+i%4,
					func(j int) string { return fmt.Sprint("k", (i+j)%7) }, fmt.Sprintf("v%d", i)))
			}
		}
		if err := e.forceRoll(bg); err != nil {
			t.Fatal(err)
		}
		e.objMu.Lock()
		var key string
		for _, o := range e.objects {
			key = o.key
		}
		e.objMu.Unlock()
		path := filepath.Join(v.dir, "objects", key)
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		e = v.restart(e)
		fh, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(patch, int64(at)%fi.Size()); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		for part := range parts {
			p, _ := e.Partition("t", part)
			for range 20 { // each pass progresses or fails; 12 batches need fewer
				if _, more, err := p.compactPass(bg, nil, &compactBufs{}, nil); err != nil || !more {
					break
				}
			}
			for off := p.LogStartOffset(); off < p.HighWatermark(); off++ {
				p.Read(bg, off, 1<<20, true) // data or an error; never a panic
			}
		}
	})
}
