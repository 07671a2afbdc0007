package delay

import "slices"

// Cancel by offset needs the store offset of an entry the in-memory index
// does not hold: one due beyond the horizon. Rather than reading the
// store partition whole, each target keeps spans: a span covers up to
// spanMax records of the target that may matter to a cancel (entries due
// beyond the horizon, and tombstones of such entries) with the range of
// their reserved offsets and of their store offsets. A cancel reads only
// the store ranges of the spans whose reserved range holds the offset
// asked for. Every scan rebuilds the spans from what it read (so spans of
// entries delivered since are dropped); Hold, commits, eviction and
// cancels add to them between scans. About 40 bytes per spanMax records
// beyond the horizon.
const spanMax = 256

type span struct {
	minRes, maxRes int64 // reserved offsets in the target
	from, to       int64 // store offsets
	n              int32
}

// noteSpan adds a record of res at store offset off to spans.
func noteSpan(spans []span, res, off int64) []span {
	if k := len(spans); k > 0 {
		s := &spans[k-1]
		if s.n < spanMax && off >= s.from {
			s.minRes, s.maxRes = min(s.minRes, res), max(s.maxRes, res)
			s.to = max(s.to, off)
			s.n++
			return spans
		}
	}
	return append(spans, span{minRes: res, maxRes: res, from: off, to: off, n: 1})
}

// spanRanges are the store ranges [from, to] of spans that may hold res,
// ascending and merged.
func spanRanges(spans []span, res int64) [][2]int64 {
	var rs [][2]int64
	for _, s := range spans {
		if s.minRes <= res && res <= s.maxRes {
			rs = append(rs, [2]int64{s.from, s.to})
		}
	}
	slices.SortFunc(rs, func(a, b [2]int64) int {
		switch {
		case a[0] < b[0]:
			return -1
		case a[0] > b[0]:
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if k := len(out); k > 0 && r[0] <= out[k-1][1]+1 {
			out[k-1][1] = max(out[k-1][1], r[1])
			continue
		}
		out = append(out, r)
	}
	return out
}

// keepSpansFrom returns the spans that reach off or beyond: those added
// or extended while a scan read up to off, which it did not see all of.
func keepSpansFrom(spans []span, off int64) []span {
	var out []span
	for _, s := range spans {
		if s.to >= off {
			out = append(out, s)
		}
	}
	return out
}
