package group

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/log"
	"github.com/sluice-mq/sluice/internal/log/batch"
)

// Record formats are Kafka's (see docs/groups.md): the key's leading int16
// says what the record is. Versions 0 and 1 are offset commits, 2 is group
// metadata, 3 and 5-8 KIP-848 consumer group records (crecords.go); 4
// and 16 are read and ignored (topic metadata and regexes are resolved
// again on load); other types are skipped.

// partitionFor is Kafka's mapping of an id to a partition of the internal
// topic (see log.CoordinatorPartition).
func partitionFor(group string, n int32) int32 { return log.CoordinatorPartition(group, n) }

func offsetKey(group, topic string, part int32) []byte {
	k := kmsg.OffsetCommitKey{Version: 1, Group: group, Topic: topic, Partition: part}
	return k.AppendTo(nil)
}

func offsetValue(o *offsetEntry) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = 3
	v.Offset = o.Offset
	v.LeaderEpoch = o.LeaderEpoch
	v.Metadata = o.Metadata
	v.CommitTimestamp = o.CommitTime
	if o.ExpireTime >= 0 {
		// Value v1 is the only one with an explicit expiry (OffsetCommit
		// v2-v4 retention_time_ms), as Kafka writes it.
		v.Version = 1
		v.ExpireTimestamp = o.ExpireTime
	}
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: 2, Group: group}
	return k.AppendTo(nil)
}

// groupValue encodes g as GroupMetadataValue v3. Members carry the metadata
// of the selected protocol only, as Kafka stores them.
func groupValue(g *group, assignments map[string][]byte, now time.Time) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	v.ProtocolType = g.protocolType
	v.Generation = g.generation
	if g.protocol != "" {
		p := g.protocol
		v.Protocol = &p
	}
	if g.leader != "" {
		l := g.leader
		v.Leader = &l
	}
	v.CurrentStateTimestamp = g.stateTime.UnixMilli()
	if g.stateTime.IsZero() {
		v.CurrentStateTimestamp = now.UnixMilli()
	}
	for _, id := range g.order {
		m := g.members[id]
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID = m.id
		mv.InstanceID = m.instanceID
		mv.ClientID = m.clientID
		mv.ClientHost = m.clientHost
		mv.RebalanceTimeoutMillis = int32(m.rebalanceTimeout.Milliseconds())
		mv.SessionTimeoutMillis = int32(m.sessionTimeout.Milliseconds())
		mv.Subscription = m.metadataFor(g.protocol)
		if a, ok := assignments[m.id]; ok {
			mv.Assignment = a
		} else {
			mv.Assignment = m.assignment
		}
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return v.AppendTo(nil)
}

// buildBatch makes one uncompressed v2 batch of recs.
func buildBatch(now time.Time, recs []kmsg.Record) ([]byte, error) {
	return batch.Build(0, now.UnixMilli(), recs)
}

// recordCount sums lastOffsetDelta+1 over the batches in b.
func recordCount(b []byte) int {
	n := 0
	for len(b) >= batch.HeaderSize {
		l := int(int32(binary.BigEndian.Uint32(b[8:])))
		n += int(int32(binary.BigEndian.Uint32(b[23:]))) + 1
		if l < 0 || l+12 > len(b) {
			break
		}
		b = b[12+l:]
	}
	return n
}

// decoded is one record of the offsets topic.
type decoded struct {
	kind   int // 0 skip, 1 offset, 2 group, 3 consumer group
	cons   *cdecoded
	group  string
	tp     tp
	offset *kmsg.OffsetCommitValue  // nil: tombstone
	meta   *kmsg.GroupMetadataValue // nil: tombstone
}

func decodeRecord(key, value []byte) (decoded, error) {
	var d decoded
	if len(key) < 2 {
		return d, fmt.Errorf("key of %d bytes", len(key))
	}
	switch ver := int16(binary.BigEndian.Uint16(key)); ver {
	case 0, 1:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(key); err != nil {
			return d, fmt.Errorf("offset commit key: %w", err)
		}
		d.kind, d.group, d.tp = 1, k.Group, tp{k.Topic, k.Partition}
		if value != nil {
			v := new(kmsg.OffsetCommitValue)
			if err := v.ReadFrom(value); err != nil {
				return d, fmt.Errorf("offset commit value of group %q: %w", k.Group, err)
			}
			d.offset = v
		}
	case 2:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(key); err != nil {
			return d, fmt.Errorf("group metadata key: %w", err)
		}
		d.kind, d.group = 2, k.Group
		if value != nil {
			v := new(kmsg.GroupMetadataValue)
			if err := v.ReadFrom(value); err != nil {
				return d, fmt.Errorf("group metadata value of group %q: %w", k.Group, err)
			}
			d.meta = v
		}
	case recConsumerGroupMetadata, recConsumerGroupMemberMetadata, recConsumerGroupTargetMeta,
		recConsumerGroupTargetMember, recConsumerGroupCurrentAssign:
		cd, err := decodeConsumerRecord(ver, key, value)
		if err != nil {
			return d, err
		}
		d.kind, d.group, d.cons = 3, cd.group, &cd
	}
	return d, nil
}
