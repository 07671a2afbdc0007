package log

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// FuzzReadCorruptObject: reads of a stored object whose bytes were damaged
// on disk (batch headers, entry framing, the index in the footer) never
// panic or loop: every read at every offset returns data or an error.
// layout picks the object: one partition alone (a dense extent, read
// through its index) or two interleaved (read batch by batch).
func FuzzReadCorruptObject(f *testing.F) {
	f.Add(uint8(0), uint32(8+29), []byte{0xff})           // first batch's base offset
	f.Add(uint8(0), uint32(8+29+8), []byte{0, 0, 0, 1})   // first batch's length
	f.Add(uint8(1), uint32(8+29+8), []byte{0x7f, 0xff})   // interleaved, length
	f.Add(uint8(0), uint32(1<<31), []byte{1, 2, 3, 4, 5}) // near the end: the footer
	f.Add(uint8(1), uint32(3<<30), []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, layout uint8, at uint32, patch []byte) {
		if len(patch) == 0 || len(patch) > 64 {
			return
		}
		v := newEnv(t)
		v.cfg = func(c *Config) { c.TailBytesPerPartition = -1; c.BlockCacheBytes = 1 << 20 }
		e := v.open()
		parts := int32(1 + layout%2)
		e.CreateTopic(bg, "t", parts, nil)
		for i := 0; i < 12; i++ {
			for part := int32(0); part < parts; part++ {
				p, _ := e.Partition("t", part)
				mustAppend(t, p, mkBatch(t, int8(i%3), int64(1000+i), 1+i%4, nil, fmt.Sprintf("v%d", i)))
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
		e = v.restart(e) // fresh caches: every read goes to the damaged file
		fh, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.WriteAt(patch, int64(at)%fi.Size()); err != nil {
			t.Fatal(err)
		}
		fh.Close()
		for part := int32(0); part < parts; part++ {
			p, _ := e.Partition("t", part)
			for off := p.LogStartOffset(); off < p.HighWatermark(); off++ {
				for _, mb := range []int32{1, 200, 1 << 20} {
					p.Read(bg, off, mb, true) // data or an error; never a panic
				}
			}
		}
	})
}
