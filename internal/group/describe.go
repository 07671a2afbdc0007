package group

import "sort"

// DescribedMember is a member in DescribeGroups.
type DescribedMember struct {
	MemberID, ClientID, ClientHost string
	InstanceID                     *string
	Metadata, Assignment           []byte
}

// Description is one group in DescribeGroups.
type Description struct {
	Group        string
	Err          error
	State        string
	ProtocolType string
	Protocol     string
	// Generation counts the group's rebalances.
	Generation int32
	Members    []DescribedMember
	// Absent is set for a group that does not exist, NotClassic for one
	// run by the consumer protocol (KIP-848). Both are reported Dead;
	// DescribeGroups v6+ turns them into GROUP_ID_NOT_FOUND.
	Absent, NotClassic bool
}

// Describe describes classic groups; unknown groups, and groups of the
// consumer protocol, are reported Dead, as Kafka does.
func (c *Coordinator) Describe(ids []string) []Description {
	out := make([]Description, 0, len(ids))
	for _, id := range ids {
		d := Description{Group: id, State: Dead.String()}
		if err := c.serves(id); err != nil {
			d.Err = err
			out = append(out, d)
			continue
		}
		if id == "" {
			d.Err = ErrInvalidGroupID
			out = append(out, d)
			continue
		}
		g, err := c.lockGroup(id, false)
		if err != nil {
			d.Err = err
			out = append(out, d)
			continue
		}
		if g == nil {
			d.Absent = true
			out = append(out, d)
			continue
		}
		if g.cg != nil {
			// Kafka describes only classic groups here (Dead before v6).
			c.unlock(g)
			d.NotClassic = true
			out = append(out, d)
			continue
		}
		d.State = g.state.String()
		d.ProtocolType = g.protocolType
		d.Generation = g.generation
		stable := g.state == Stable
		if stable {
			d.Protocol = g.protocol
		}
		for _, mid := range g.order {
			m := g.members[mid]
			dm := DescribedMember{MemberID: m.id, ClientID: m.clientID, ClientHost: m.clientHost, InstanceID: m.instanceID}
			if stable {
				dm.Metadata = m.metadataFor(g.protocol)
				dm.Assignment = m.assignment
			}
			d.Members = append(d.Members, dm)
		}
		c.unlock(g)
		out = append(out, d)
	}
	return out
}

// Listed is one group in ListGroups.
type Listed struct {
	Group, ProtocolType, State string
	Type                       string // "classic" or "consumer"
}

// List lists every group this coordinator serves, sorted by id.
func (c *Coordinator) List() ([]Listed, error) {
	if c.anyLoading() {
		return nil, ErrLoading
	}
	c.mu.Lock()
	gs := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		gs = append(gs, g)
	}
	c.mu.Unlock()
	out := make([]Listed, 0, len(gs))
	for _, g := range gs {
		g.mu.Lock()
		switch {
		case g.state == Dead:
		case g.cg != nil:
			out = append(out, Listed{Group: g.id, ProtocolType: "consumer", State: g.consumerState(), Type: "consumer"})
		default:
			out = append(out, Listed{Group: g.id, ProtocolType: g.protocolType, State: g.state.String(), Type: "classic"})
		}
		g.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out, nil
}
