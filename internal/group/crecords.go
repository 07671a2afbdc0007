package group

import (
	"encoding/binary"
	"errors"
	"fmt"
	"sort"
	"time"
)

// KIP-848 records in __consumer_offsets, encoded as Kafka's generated
// coordinator records: the key is an int16 record type followed by the key
// fields in the non-flexible encoding; the value is an int16 version (0)
// followed by the fields in the flexible (compact) encoding with an empty
// tagged-field section. kmsg v1.15.1 has no types for these, so they are
// written here by hand. See docs/groups.md.
const (
	recConsumerGroupMetadata         = 3 // ConsumerGroupMetadataKey/Value: group epoch
	recConsumerGroupPartitionMeta    = 4 // ConsumerGroupPartitionMetadata: read and ignored
	recConsumerGroupMemberMetadata   = 5 // ConsumerGroupMemberMetadataKey/Value: subscription
	recConsumerGroupTargetMeta       = 6 // ConsumerGroupTargetAssignmentMetadataKey/Value: assignment epoch
	recConsumerGroupTargetMember     = 7 // ConsumerGroupTargetAssignmentMemberKey/Value
	recConsumerGroupCurrentAssign    = 8 // ConsumerGroupCurrentMemberAssignmentKey/Value
	recConsumerGroupRegularExpresion = 16
)

var errShort = errors.New("record truncated")

// ckey encodes a key of record type typ with string fields.
func ckey(typ int16, fields ...string) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(typ))
	for _, f := range fields {
		b = binary.BigEndian.AppendUint16(b, uint16(len(f)))
		b = append(b, f...)
	}
	return b
}

// wbuf is a flexible-version value writer.
type wbuf []byte

func newValue() wbuf             { return binary.BigEndian.AppendUint16(nil, 0) }
func (w wbuf) i8(v int8) wbuf    { return append(w, byte(v)) }
func (w wbuf) i32(v int32) wbuf  { return binary.BigEndian.AppendUint32(w, uint32(v)) }
func (w wbuf) uv(v uint64) wbuf  { return binary.AppendUvarint(w, v) }
func (w wbuf) str(s string) wbuf { return append(w.uv(uint64(len(s))+1), s...) }
func (w wbuf) end() []byte       { return w.uv(0) } // no tagged fields
func (w wbuf) nstr(s *string) wbuf {
	if s == nil {
		return w.uv(0)
	}
	return w.str(*s)
}
func (w wbuf) strs(ss []string) wbuf {
	w = w.uv(uint64(len(ss)) + 1)
	for _, s := range ss {
		w = w.str(s)
	}
	return w
}

// assignment encodes []TopicPartitions {TopicId uuid, Partitions []int32}
// sorted by topic id.
func (w wbuf) assignment(a assignment) wbuf {
	ids := a.ids()
	w = w.uv(uint64(len(ids)) + 1)
	for _, id := range ids {
		w = append(w, id[:]...)
		ps := a[id]
		w = w.uv(uint64(len(ps)) + 1)
		for _, p := range ps {
			w = w.i32(p)
		}
		w = w.uv(0)
	}
	return w
}

// rbuf reads what wbuf writes, checking bounds.
type rbuf struct {
	b   []byte
	err error
}

func (r *rbuf) take(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.err = errShort
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}
func (r *rbuf) i8() int8 {
	b := r.take(1)
	if b == nil {
		return 0
	}
	return int8(b[0])
}
func (r *rbuf) i16() int16 {
	b := r.take(2)
	if b == nil {
		return 0
	}
	return int16(binary.BigEndian.Uint16(b))
}
func (r *rbuf) i32() int32 {
	b := r.take(4)
	if b == nil {
		return 0
	}
	return int32(binary.BigEndian.Uint32(b))
}
func (r *rbuf) uv() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errShort
		return 0
	}
	r.b = r.b[n:]
	return v
}
func (r *rbuf) count() int {
	n := r.uv()
	if n > uint64(len(r.b))+1 {
		r.err = errShort
		return 0
	}
	return int(n) - 1 // -1: null
}
func (r *rbuf) nstr() *string {
	n := r.count()
	if n < 0 {
		return nil
	}
	s := string(r.take(n))
	return &s
}
func (r *rbuf) str() string {
	if s := r.nstr(); s != nil {
		return *s
	}
	return ""
}
func (r *rbuf) kstr() string { // non-flexible key string
	n := int(r.i16())
	return string(r.take(n))
}
func (r *rbuf) strs() []string {
	n := r.count()
	if n < 0 {
		return nil
	}
	out := make([]string, 0, min(n, 1024))
	for i := 0; i < n && r.err == nil; i++ {
		out = append(out, r.str())
	}
	return out
}
func (r *rbuf) tags() {
	n := r.uv()
	for i := uint64(0); i < n && r.err == nil; i++ {
		r.uv() // tag
		r.take(int(r.uv()))
	}
}
func (r *rbuf) assignment() assignment {
	n := r.count()
	a := assignment{}
	for i := 0; i < n && r.err == nil; i++ {
		var id [16]byte
		copy(id[:], r.take(16))
		m := r.count()
		ps := make([]int32, 0, min(max(m, 0), 4096))
		for j := 0; j < m && r.err == nil; j++ {
			ps = append(ps, r.i32())
		}
		r.tags()
		if len(ps) > 0 {
			sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
			a[id] = ps
		}
	}
	return a
}

// value reads a value's version and checks it is 0.
func openValue(b []byte) (*rbuf, error) {
	r := &rbuf{b: b}
	if v := r.i16(); r.err == nil && v != 0 {
		return nil, fmt.Errorf("value version %d", v)
	}
	return r, r.err
}

func cgMetadataValue(epoch int32) []byte   { return newValue().i32(epoch).end() }
func cgTargetMetaValue(epoch int32) []byte { return newValue().i32(epoch).end() }
func cgTargetMemberValue(a assignment) []byte {
	return newValue().assignment(a).end()
}
func cgCurrentValue(m *cmember) []byte {
	return newValue().i32(m.epoch).i32(m.prevEpoch).i8(m.state).
		assignment(m.assigned).assignment(m.pending).end()
}
func cgMemberValue(m *cmember) []byte {
	w := newValue().nstr(m.instanceID).nstr(m.rackID).str(m.clientID).str(m.clientHost).strs(m.topics)
	var re *string
	if m.regex != "" {
		re = &m.regex
	}
	w = w.nstr(re).i32(int32(m.rebalanceTimeout.Milliseconds()))
	var as *string
	if m.assignor != "" {
		as = &m.assignor
	}
	return w.nstr(as).end()
}

// cdecoded is one KIP-848 record.
type cdecoded struct {
	typ    int16
	group  string
	member string
	null   bool

	epoch    int32
	m        *cmember // member metadata (5) or current assignment (8) fields
	target   assignment
	rtimeout int32
}

func decodeConsumerRecord(typ int16, key, value []byte) (cdecoded, error) {
	d := cdecoded{typ: typ, null: value == nil}
	k := &rbuf{b: key[2:]}
	d.group = k.kstr()
	switch typ {
	case recConsumerGroupMemberMetadata, recConsumerGroupTargetMember, recConsumerGroupCurrentAssign:
		d.member = k.kstr()
	case recConsumerGroupRegularExpresion:
		k.kstr()
	}
	if k.err != nil {
		return d, fmt.Errorf("key of record type %d: %w", typ, k.err)
	}
	if value == nil {
		return d, nil
	}
	r, err := openValue(value)
	if err != nil {
		return d, err
	}
	switch typ {
	case recConsumerGroupMetadata, recConsumerGroupTargetMeta:
		d.epoch = r.i32()
	case recConsumerGroupTargetMember:
		d.target = r.assignment()
	case recConsumerGroupCurrentAssign:
		d.m = &cmember{}
		d.m.epoch = r.i32()
		d.m.prevEpoch = r.i32()
		d.m.state = r.i8()
		d.m.assigned = r.assignment()
		d.m.pending = r.assignment()
	case recConsumerGroupMemberMetadata:
		m := &cmember{}
		m.instanceID = r.nstr()
		m.rackID = r.nstr()
		m.clientID = r.str()
		m.clientHost = r.str()
		m.topics = r.strs()
		if re := r.nstr(); re != nil {
			m.regex = *re
		}
		d.rtimeout = r.i32()
		if as := r.nstr(); as != nil {
			m.assignor = *as
		}
		d.m = m
	}
	r.tags()
	if r.err != nil {
		return d, fmt.Errorf("value of record type %d for group %q: %w", typ, d.group, r.err)
	}
	return d, nil
}

// replayConsumer applies one KIP-848 record while loading.
func (g *group) replayConsumer(d *cdecoded) {
	if d.typ == recConsumerGroupMetadata && d.null {
		g.cg = nil
		return
	}
	if g.cg == nil {
		if d.null {
			return
		}
		g.cg = newCGroup()
	}
	cg := g.cg
	member := func() *cmember {
		m := cg.members[d.member]
		if m == nil {
			m = &cmember{id: d.member, assigned: assignment{}, pending: assignment{}}
			cg.members[d.member] = m
		}
		return m
	}
	switch d.typ {
	case recConsumerGroupMetadata:
		cg.epoch = d.epoch
	case recConsumerGroupTargetMeta:
		cg.assignEpoch = 0
		if !d.null {
			cg.assignEpoch = d.epoch
		}
	case recConsumerGroupTargetMember:
		if d.null {
			delete(cg.target, d.member)
		} else {
			cg.target[d.member] = d.target
		}
	case recConsumerGroupCurrentAssign:
		if d.null {
			if m := cg.members[d.member]; m != nil {
				m.assigned, m.pending = assignment{}, assignment{}
			}
			return
		}
		m := member()
		m.epoch, m.prevEpoch, m.state = d.m.epoch, d.m.prevEpoch, d.m.state
		m.assigned, m.pending = d.m.assigned, d.m.pending
	case recConsumerGroupMemberMetadata:
		if d.null {
			if m := cg.members[d.member]; m != nil && m.instanceID != nil && cg.statics[*m.instanceID] == m.id {
				delete(cg.statics, *m.instanceID)
			}
			delete(cg.members, d.member)
			return
		}
		m := member()
		m.instanceID, m.rackID, m.clientID, m.clientHost = d.m.instanceID, d.m.rackID, d.m.clientID, d.m.clientHost
		m.topics, m.regex, m.assignor = d.m.topics, d.m.regex, d.m.assignor
		m.rebalanceTimeout = time.Duration(d.rtimeout) * time.Millisecond
		if m.instanceID != nil {
			cg.statics[*m.instanceID] = m.id
		}
	}
}

// finishConsumerLoad rebuilds what is not stored: compiled regexes,
// partition owners, session deadlines.
func (g *group) finishConsumerLoad(now time.Time) {
	cg := g.cg
	cg.owners = map[tpKey]string{}
	for _, m := range cg.members {
		if m.regex != "" {
			m.re, _ = compileRegex(m.regex)
		}
		g.claimOwners(m)
		m.deadline = now.Add(g.c.cfg.ConsumerSessionTimeout)
		if m.state == msUnrevoked {
			m.revokeDeadline = now.Add(max(m.rebalanceTimeout, time.Second))
		}
	}
	// The subscribed topics' metadata is not stored (Kafka 4.1 keeps a
	// hash of it in the group record), so the first heartbeat after a load
	// bumps the epoch once: topics that changed while the broker was down
	// are picked up; otherwise the target comes out the same.
	cg.subFP = ""
	g.state, g.stateTime = Empty, now
	g.syncConsumerState(now)
}
