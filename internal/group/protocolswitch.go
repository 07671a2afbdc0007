package group

import "github.com/twmb/franz-go/pkg/kmsg"

// Converting a group between the classic and the consumer (KIP-848)
// protocols, and the tombstones of a consumer group's records.

// toConsumer turns an empty classic group into a consumer group (offsets
// stay), returning the tombstone of its classic metadata.
func (g *group) toConsumer() []kmsg.Record {
	var recs []kmsg.Record
	if g.hasStored {
		recs = append(recs, kmsg.Record{Key: groupKey(g.id)})
		g.hasStored = false
	}
	g.cg = newCGroup()
	g.protocolType, g.protocol, g.leader, g.generation = "consumer", "", "", 0
	return recs
}

// toClassic turns an empty consumer group back into a classic one,
// returning the tombstones of its consumer records.
func (g *group) toClassic() []kmsg.Record {
	recs := g.consumerTombstones()
	g.cg = nil
	g.protocolType = ""
	g.subscribed = nil
	return recs
}

func (g *group) consumerTombstones() []kmsg.Record {
	if g.cg == nil {
		return nil
	}
	var recs []kmsg.Record
	for id := range g.cg.members {
		recs = append(recs, memberTombstones(g.id, id)...)
	}
	return append(recs,
		kmsg.Record{Key: ckey(recConsumerGroupTargetMeta, g.id)},
		kmsg.Record{Key: ckey(recConsumerGroupMetadata, g.id)})
}

func memberTombstones(group, member string) []kmsg.Record {
	return []kmsg.Record{
		{Key: ckey(recConsumerGroupCurrentAssign, group, member)},
		{Key: ckey(recConsumerGroupTargetMember, group, member)},
		{Key: ckey(recConsumerGroupMemberMetadata, group, member)},
	}
}
