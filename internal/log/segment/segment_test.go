package segment

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log/batch"
)

func mkObject(t testing.TB, parts int, batches int) []byte {
	b := NewBuilder(256)
	for p := 0; p < parts; p++ {
		b.StartExtent([16]byte{byte(p)}, int32(p), 10)
		for i := 0; i < batches; i++ {
			recs := []kmsg.Record{{Value: make([]byte, 100)}, {Value: []byte("x")}}
			bt, err := batch.Build(0, int64(1000*i), recs)
			if err != nil {
				t.Fatal(err)
			}
			batch.SetBaseOffset(bt, int64(10+2*i))
			b.AddBatch(bt)
		}
		b.EndExtent(-1)
	}
	obj, _ := b.Finish()
	return obj
}

func decodeObject(obj []byte) ([]Extent, error) {
	if len(obj) < TrailerSize {
		return nil, ErrCorrupt
	}
	fs, err := ParseTrailer(obj[len(obj)-TrailerSize:], int64(len(obj)))
	if err != nil {
		return nil, err
	}
	return DecodeFooter(obj[fs:], fs)
}

func TestBuildDecode(t *testing.T) {
	obj := mkObject(t, 3, 20)
	exts, err := decodeObject(obj)
	if err != nil || len(exts) != 3 {
		t.Fatalf("%v %d", err, len(exts))
	}
	for _, e := range exts {
		if e.Base != 10 || e.Last != 49 || e.MaxTS != 19000 || e.MaxTSOffset != 48 || e.IndexCount < 5 {
			t.Fatalf("extent %+v", e)
		}
		idx, err := DecodeIndex(obj[e.IndexPos : e.IndexPos+int64(e.IndexCount)*EntrySize])
		if err != nil || idx[0].RelPos != 0 || idx[0].Offset != 10 {
			t.Fatalf("index %+v %v", idx, err)
		}
		for _, ie := range idx {
			bt := obj[e.Pos+int64(ie.RelPos):]
			if batch.BaseOffset(bt) != ie.Offset {
				t.Fatalf("index entry %+v points at offset %d", ie, batch.BaseOffset(bt))
			}
		}
	}
	obj[len(obj)-30] ^= 1
	if _, err := decodeObject(obj); err == nil {
		t.Fatal("corrupt footer accepted")
	}
}

func FuzzDecodeFooter(f *testing.F) {
	f.Add(mkObject(f, 1, 3))
	f.Add(mkObject(f, 4, 10))
	f.Fuzz(func(t *testing.T, obj []byte) {
		exts, err := decodeObject(obj)
		if err != nil {
			return
		}
		fs, _ := ParseTrailer(obj[len(obj)-TrailerSize:], int64(len(obj)))
		for _, e := range exts {
			if e.Pos+e.Size > fs {
				t.Fatalf("extent %+v past footer %d", e, fs)
			}
			if _, err := DecodeIndex(obj[e.IndexPos : e.IndexPos+int64(e.IndexCount)*EntrySize]); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestGenerateCorpus rewrites testdata/fuzz/FuzzDecodeFooter (SLUICE_GEN_CORPUS=1).
func TestGenerateCorpus(t *testing.T) {
	if os.Getenv("SLUICE_GEN_CORPUS") == "" {
		t.Skip("set SLUICE_GEN_CORPUS=1 to regenerate the seed corpus")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecodeFooter")
	os.MkdirAll(dir, 0o755)
	empty, _ := NewBuilder(0).Finish()
	seeds := [][]byte{mkObject(t, 1, 1), mkObject(t, 2, 30), empty}
	for i, s := range seeds {
		body := "go test fuzz v1\n[]byte(" + strconv.Quote(string(s)) + ")\n"
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed%d", i)), []byte(body), 0o644)
	}
}
