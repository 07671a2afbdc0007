package bench

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
)

// directBlock is the write size of the disk probe: 1 MiB, like
// `dd bs=1M`, and a multiple of every logical block size O_DIRECT needs.
const directBlock = 1 << 20

// ErrDirectIO means the platform or filesystem refused O_DIRECT (tmpfs does).
var ErrDirectIO = errors.New("bench: direct I/O not supported")

// DiskBW is the write bandwidth of one directory's disk, measured the way
// scripts/diskbw.sh does with dd.
type DiskBW struct {
	Dir   string        `json:"dir"`
	Bytes int64         `json:"bytes"`
	Modes []DiskBWMode  `json:"modes"`
	Took  time.Duration `json:"took_ns"`
}

// DiskBWMode is one way of writing: see diskModes.
type DiskBWMode struct {
	Name     string        `json:"name"`
	Like     string        `json:"like"` // the dd command line it matches
	Elapsed  time.Duration `json:"elapsed_ns,omitempty"`
	MBPerSec float64       `json:"mb_per_sec,omitempty"`
	Err      string        `json:"error,omitempty"`
}

type diskMode struct {
	name, like string
	direct     bool // O_DIRECT: bypass the page cache
	dsync      bool // O_DSYNC: every write durable before it returns
	fdatasync  bool // one fdatasync after the last write, inside the timing
}

// diskModes: "direct" is the raw device rate with no page cache; "direct+dsync" is
// what a log that syncs every 1 MiB write sees; "fdatasync" is buffered writes
// made durable once at the end.
var diskModes = []diskMode{
	{name: "direct", like: "dd bs=1M oflag=direct", direct: true},
	{name: "direct+dsync", like: "dd bs=1M oflag=direct,dsync", direct: true, dsync: true},
	{name: "fdatasync", like: "dd bs=1M conv=fdatasync", fdatasync: true},
}

// MeasureDiskBW writes bytes (rounded down to whole MiB) of random data to a
// temporary file in dir in each mode and removes it. A mode that fails
// carries its error; the others are still measured.
func MeasureDiskBW(ctx context.Context, dir string, bytes int64) *DiskBW {
	t0 := time.Now()
	blocks := bytes / directBlock
	d := &DiskBW{Dir: dir, Bytes: blocks * directBlock}
	for _, m := range diskModes {
		r := DiskBWMode{Name: m.name, Like: m.like}
		el, err := writeFile(ctx, dir, blocks, m)
		if err != nil {
			r.Err = err.Error()
		} else {
			r.Elapsed = el
			r.MBPerSec = perSec(d.Bytes, el) / 1e6
		}
		d.Modes = append(d.Modes, r)
	}
	d.Took = time.Since(t0)
	return d
}

func (d *DiskBW) writeText(b *strings.Builder) {
	fmt.Fprintf(b, "disk %s  (%d MiB of random data, 1 MiB writes)\n", d.Dir, d.Bytes>>20)
	for _, m := range d.Modes {
		if m.Err != "" {
			fmt.Fprintf(b, "  %-13s error: %s\n", m.Name, m.Err)
			continue
		}
		fmt.Fprintf(b, "  %-13s %8.1f MB/s  in %v  (like %s)\n", m.Name, m.MBPerSec, m.Elapsed.Round(time.Millisecond), m.Like)
	}
}
