package delay

// target is a target partition as a store partition's worker knows it:
// interned, so that entries point at it instead of holding its name.
type target struct {
	Target
	nextSeq  int32 // the sequence the next delivery batch starts at
	seqKnown bool  // nextSeq read from the target's producer state
	retry    *chunk
	spans    []span // records beyond the horizon, for cancel by offset (spans.go)
}

// entryID names an entry in the index: its target and reserved offset.
type entryID struct {
	t   *target
	res int64
}
