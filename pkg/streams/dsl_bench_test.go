package streams

import (
	"fmt"
	"testing"
	"time"
)

// The DSL's stateful operators on the TestDriver (Pebble on an in-memory
// filesystem, a commit per record), with a tumbling count as the baseline
// to compare against in the same run. Keys cycle over 100, times advance
// 1ms a record with some disorder.
func benchDriver(b *testing.B, build func(*Builder)) {
	bld := NewBuilder()
	build(bld)
	topo, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewTestDriver(topo)
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		topic := "in"
		if i%2 == 1 {
			topic = "in2"
		}
		ts := int64(i) - int64(i%7)*3
		if err := Pipe(d, topic, String(), String(), keys[(i/2)%100], "v", time.UnixMilli(ts)); err != nil {
			b.Fatal(err)
		}
	}
}

func twoStreams(b *Builder) (*KStream[string, string], *KStream[string, string]) {
	return Stream(b, "in", String(), String()), Stream(b, "in2", String(), String())
}

func BenchmarkDSLTumblingCount(b *testing.B) {
	benchDriver(b, func(bld *Builder) {
		l, r := twoStreams(bld)
		WindowedCount(WindowedBy(GroupByKey(l.Merge(r), String(), String()), TumblingWindows(100*time.Millisecond, 50*time.Millisecond)), "w")
	})
}

func BenchmarkDSLSlidingCount(b *testing.B) {
	benchDriver(b, func(bld *Builder) {
		l, r := twoStreams(bld)
		SlidingCount(SlidingWindowedBy(GroupByKey(l.Merge(r), String(), String()), SlidingWindows{TimeDifference: 100 * time.Millisecond, Grace: 50 * time.Millisecond}), "w")
	})
}

func BenchmarkDSLOuterJoinStreams(b *testing.B) {
	benchDriver(b, func(bld *Builder) {
		l, r := twoStreams(bld)
		OuterJoinStreams(l, r, String(), String(), String(), JoinWindows{Before: 100 * time.Millisecond, After: 100 * time.Millisecond, Grace: 50 * time.Millisecond},
			func(_ string, a string, _ bool, c string, _ bool) string { return a + c }, "j")
	})
}

func BenchmarkDSLOuterJoinTables(b *testing.B) {
	benchDriver(b, func(bld *Builder) {
		l := Table(bld, "in", String(), String(), "l")
		r := Table(bld, "in2", String(), String(), "r")
		OuterJoinTables(l, r, func(_ string, a string, _ bool, c string, _ bool) string { return a + c }, String(), "j")
	})
}

// Wide windows: about 2,000 buffered records of 100 keys within reach of
// each record.
func BenchmarkDSLInnerJoinStreamsWide(b *testing.B) {
	benchDriver(b, func(bld *Builder) {
		l, r := twoStreams(bld)
		JoinStreams(l, r, String(), String(), String(), JoinWindows{Before: time.Second, After: time.Second},
			func(_ string, a, c string) string { return a + c }, "j")
	})
}
