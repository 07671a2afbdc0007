package log

// Size returns the bytes of record batches the partition holds from its log
// start offset on, rolled and unrolled (DescribeLogDirs). Shared objects are
// counted by this partition's share.
func (p *Partition) Size() int64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	ls := p.logStart.Load()
	var n int64
	var rolledTo int64 = -1
	for _, x := range p.extents {
		if x.Last >= ls {
			n += x.Size
		}
		rolledTo = x.Last
	}
	for _, t := range p.tail {
		if t.last <= rolledTo || t.last < ls {
			continue
		}
		n += int64(len(t.data))
	}
	return n
}
