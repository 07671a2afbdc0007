package kafka

import (
	"testing"
	"time"
)

// TestWaitAnyManyChannels: a long-polling fetch over more partitions than
// one select can hold (65,536 cases; 100,000 partitions panicked) wakes for
// any one of them, and times out or stops with the connection otherwise.
func TestWaitAnyManyChannels(t *testing.T) {
	for _, n := range []int{2, waitChunk, waitChunk + 1, 70000} {
		chans := make([]chan struct{}, n)
		ro := make([]<-chan struct{}, n)
		for i := range chans {
			chans[i] = make(chan struct{})
			ro[i] = chans[i]
		}
		expired := make(chan time.Time)
		close(expired)
		if waitAny(ro, expired, nil) {
			t.Fatalf("%d channels: woke with none fired", n)
		}
		closed := make(chan struct{})
		close(closed)
		if waitAny(ro, nil, closed) {
			t.Fatalf("%d channels: woke on a closed connection", n)
		}
		close(chans[n-1])
		if !waitAny(ro, nil, nil) {
			t.Fatalf("%d channels: the last one fired and the wait did not see it", n)
		}
	}
}
