package group

import (
	"slices"
	"sort"
)

// TopicAssignment is partitions of one topic in ConsumerGroupDescribe.
type TopicAssignment struct {
	ID         [16]byte
	Topic      string
	Partitions []int32
}

// ConsumerMemberDescription is a member in ConsumerGroupDescribe.
type ConsumerMemberDescription struct {
	MemberID, ClientID, ClientHost string
	InstanceID, RackID             *string
	MemberEpoch                    int32
	SubscribedTopics               []string
	SubscribedRegex                *string
	Assignment, Target             []TopicAssignment
}

// ConsumerGroupDescription is one group in ConsumerGroupDescribe.
type ConsumerGroupDescription struct {
	Group           string
	Err             error
	State           string
	Epoch           int32
	AssignmentEpoch int32
	Assignor        string
	Members         []ConsumerMemberDescription
}

// DescribeConsumerGroups describes consumer-protocol groups; others are
// ErrGroupNotFound, as in Kafka.
func (c *Coordinator) DescribeConsumerGroups(ids []string) []ConsumerGroupDescription {
	names := map[[16]byte]string{}
	for _, t := range c.listTopics() {
		names[t.ID] = t.Name
	}
	conv := func(a assignment) []TopicAssignment {
		out := []TopicAssignment{}
		for _, id := range a.ids() {
			out = append(out, TopicAssignment{ID: id, Topic: names[id], Partitions: slices.Clone(a[id])})
		}
		return out
	}
	out := make([]ConsumerGroupDescription, 0, len(ids))
	for _, id := range ids {
		d := ConsumerGroupDescription{Group: id}
		if err := c.serves(id); err != nil {
			d.Err = err
		} else if id == "" {
			d.Err = ErrInvalidGroupID
		}
		if d.Err != nil {
			out = append(out, d)
			continue
		}
		g, err := c.lockGroup(id, false)
		if err != nil {
			d.Err = err
			out = append(out, d)
			continue
		}
		if g == nil || g.cg == nil || g.state == Dead {
			if g != nil {
				c.unlock(g)
			}
			d.Err = ErrGroupNotFound
			out = append(out, d)
			continue
		}
		cg := g.cg
		d.State, d.Epoch, d.AssignmentEpoch, d.Assignor = g.consumerState(), cg.epoch, cg.assignEpoch, g.preferredAssignor()
		mids := make([]string, 0, len(cg.members))
		for mid := range cg.members {
			mids = append(mids, mid)
		}
		sort.Strings(mids)
		for _, mid := range mids {
			m := cg.members[mid]
			md := ConsumerMemberDescription{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost,
				InstanceID: m.instanceID, RackID: m.rackID, MemberEpoch: m.epoch,
				SubscribedTopics: slices.Clone(m.topics), Assignment: conv(m.assigned), Target: conv(cg.target[m.id])}
			if md.SubscribedTopics == nil {
				md.SubscribedTopics = []string{}
			}
			if m.regex != "" {
				re := m.regex
				md.SubscribedRegex = &re
			}
			d.Members = append(d.Members, md)
		}
		c.unlock(g)
		out = append(out, d)
	}
	return out
}
