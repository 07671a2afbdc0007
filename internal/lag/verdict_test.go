package lag

import "testing"

func TestEvaluate(t *testing.T) {
	const stopped = 60_000
	w := func(es ...[3]int64) []Entry {
		out := make([]Entry, len(es))
		for i, e := range es {
			out[i] = Entry{Offset: e[0], Lag: e[1], At: e[2]}
		}
		return out
	}
	for _, c := range []struct {
		name       string
		w          []Entry
		lag, now   int64
		lastCommit int64
		want       Status
	}{
		{"no lag now", w([3]int64{10, 5, 0}, [3]int64{10, 9, 1000}), 0, 2000, 0, OK},
		{"caught up inside the window", w([3]int64{10, 0, 0}, [3]int64{12, 3, 1000}), 3, 2000, 0, OK},
		{"lag shrinking", w([3]int64{10, 50, 0}, [3]int64{40, 30, 1000}, [3]int64{80, 10, 2000}), 10, 3000, 0, OK},
		{"lag growing while committing", w([3]int64{10, 5, 0}, [3]int64{20, 6, 1000}, [3]int64{30, 9, 2000}), 9, 3000, 0, Warning},
		{"same offset, lag", w([3]int64{10, 5, 0}, [3]int64{10, 6, 1000}, [3]int64{10, 9, 2000}), 9, 3000, 0, Stalled},
		{"same offset, lag flat", w([3]int64{10, 5, 0}, [3]int64{10, 5, 1000}), 5, 1500, 0, Stalled},
		{"rewind", w([3]int64{100, 5, 0}, [3]int64{10, 95, 1000}), 95, 1500, 0, Rewind},
		{"rewind after catching up", w([3]int64{100, 0, 0}, [3]int64{0, 100, 1000}), 100, 1500, 0, Rewind},
		{"rewind before catching up is history", w([3]int64{100, 5, 0}, [3]int64{10, 95, 1000}, [3]int64{105, 0, 2000}, [3]int64{106, 4, 3000}), 4, 3500, 0, OK},
		{"stopped: idle beyond span and threshold", w([3]int64{10, 5, 0}, [3]int64{20, 5, 1000}), 50, 1000 + stopped + 1, 0, Stopped},
		{"idle beyond span but under threshold", w([3]int64{10, 5, 0}, [3]int64{20, 6, 1000}), 50, 30_000, 0, Warning},
		{"idle under span", w([3]int64{10, 5, 0}, [3]int64{20, 3, 200_000}), 50, 300_000, 0, OK},
		{"one commit, fresh", w([3]int64{10, 5, 0}), 5, 1000, 0, OK},
		{"one commit, stopped", w([3]int64{10, 5, 0}), 5, stopped + 1, 0, Stopped},
		{"empty window, recent commit", nil, 5, 10_000, 5_000, OK},
		{"empty window, old commit", nil, 5, stopped + 10_000, 5_000, Stopped},
		{"empty window, commit time unknown", nil, 5, stopped * 10, 0, OK},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := evaluate(c.w, c.lag, c.now, stopped, c.lastCommit); got != c.want {
				t.Fatalf("evaluate = %v, want %v", got, c.want)
			}
		})
	}
}

func TestStatusNames(t *testing.T) {
	for s := OK; s <= Error; s++ {
		b, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var back Status
		if err := back.UnmarshalJSON(b); err != nil || back != s {
			t.Fatalf("%v: round trip gave %v, %v", s, back, err)
		}
	}
	var s Status
	if err := s.UnmarshalJSON([]byte(`"SLEEPY"`)); err == nil {
		t.Fatal("unknown status accepted")
	}
}
