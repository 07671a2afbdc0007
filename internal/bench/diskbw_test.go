package bench

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func TestMeasureDiskBW(t *testing.T) {
	dir := t.TempDir()
	d := MeasureDiskBW(t.Context(), dir, 4*directBlock+123) // rounds down to 4 MiB
	if d.Bytes != 4*directBlock || len(d.Modes) != len(diskModes) {
		t.Fatalf("measured %d bytes in %d modes", d.Bytes, len(d.Modes))
	}
	for _, m := range d.Modes {
		switch {
		case m.Err != "":
			// Some filesystems refuse O_DIRECT; that must be the reason.
			if !strings.Contains(m.Err, ErrDirectIO.Error()) {
				t.Errorf("%s: %s", m.Name, m.Err)
			}
		case m.MBPerSec <= 0 || m.Elapsed <= 0:
			t.Errorf("%s: %v MB/s in %v", m.Name, m.MBPerSec, m.Elapsed)
		}
	}
	left, err := os.ReadDir(dir)
	if err != nil || len(left) != 0 {
		t.Errorf("probe left files behind: %v %v", left, err)
	}
	var b strings.Builder
	d.writeText(&b)
	t.Logf("\n%s", b.String())
}

func TestDiskOnlyRun(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Records, cfg.DiskBWDir, cfg.DiskBWBytes = 0, t.TempDir(), directBlock
	res, err := Run(t.Context(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Disk == nil || len(res.Runs) != 0 {
		t.Fatalf("result: %+v", res)
	}
	var out bytes.Buffer
	if err := res.WriteText(&out); err != nil || !strings.Contains(out.String(), "disk ") {
		t.Errorf("text %q err %v", out.String(), err)
	}
}

func TestMeasureDiskBWMissingDir(t *testing.T) {
	d := MeasureDiskBW(t.Context(), "/nonexistent/sluice-bench", directBlock)
	for _, m := range d.Modes {
		if m.Err == "" {
			t.Errorf("%s: no error writing to a missing directory", m.Name)
		}
	}
}
