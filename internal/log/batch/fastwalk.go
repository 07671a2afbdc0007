package batch

// fastRecord checks the common shape of an uncompressed record at p[i:]:
// every varint one or two bytes long (lengths and deltas under 8,192) and
// no headers. It returns the index after the record, or ok false for
// anything else, which walkRecord then checks in full. The checks are the
// same: a record that fastRecord accepts, walkRecord accepts too.
func fastRecord(p []byte, i int) (next int, tsDelta int64, keyNull, ok bool) {
	l, i, ok := zz12(p, i)
	if !ok || l <= 0 || l > int64(len(p)-i) {
		return 0, 0, false, false
	}
	end := i + int(l)
	rec := p[:end]
	i++ // attributes
	if tsDelta, i, ok = zz12(rec, i); !ok {
		return 0, 0, false, false
	}
	if _, i, ok = zz12(rec, i); !ok { // offsetDelta
		return 0, 0, false, false
	}
	var kl, vl int64
	if kl, i, ok = zz12(rec, i); !ok || kl < -1 || kl > int64(end-i) {
		return 0, 0, false, false
	}
	i += int(max(kl, 0))
	if vl, i, ok = zz12(rec, i); !ok || vl < -1 || vl > int64(end-i) {
		return 0, 0, false, false
	}
	i += int(max(vl, 0))
	if i != end-1 || rec[i] != 0 { // no headers, and nothing after
		return 0, 0, false, false
	}
	return end, tsDelta, kl < 0, true
}

// zz12 decodes a zigzag varint of one or two bytes at b[i:].
func zz12(b []byte, i int) (int64, int, bool) {
	if i >= len(b) {
		return 0, 0, false
	}
	x := uint64(b[i])
	if x >= 0x80 {
		if i+1 >= len(b) || b[i+1] >= 0x80 {
			return 0, 0, false
		}
		x = x&0x7f | uint64(b[i+1])<<7
		i++
	}
	return int64(x>>1) ^ -int64(x&1), i + 1, true
}
