package broker

// Node is one broker as clients see it.
type Node struct {
	ID   int32
	Host string // the address on the first listener
	Port int32
	Rack string
	// Endpoints are the advertised addresses by listener, when the broker
	// has more than one.
	Endpoints []Endpoint
}

// Endpoint is a broker's advertised address on one listener.
type Endpoint struct {
	Listener string
	Host     string
	Port     int32
}

// Addr is the node's address on listener: clients are told the brokers'
// addresses on the listener they asked through (Kafka's rule). A broker
// without that listener answers with its first.
func (n Node) Addr(listener string) (string, int32) {
	for _, e := range n.Endpoints {
		if e.Listener == listener {
			return e.Host, e.Port
		}
	}
	return n.Host, n.Port
}

// Topology says which brokers are live and which one leads each partition.
// A single node is the only broker and leads everything (the default when
// Config.Topology is nil); in cluster mode internal/cluster answers.
type Topology interface {
	Nodes() []Node
	// Leader is the partition's leader and its leader epoch; ok=false
	// while it has none (failover in progress).
	Leader(topic string, partition int32) (node, epoch int32, ok bool)
	// ControllerID is the broker reported as controller, -1 if none.
	ControllerID() int32
}

// Nodes are the live brokers, sorted by id.
func (b *Broker) Nodes() []Node {
	if b.cfg.Topology != nil {
		return b.cfg.Topology.Nodes()
	}
	host, port := b.Advertised()
	return []Node{{ID: b.cfg.NodeID, Host: host, Port: port, Rack: b.cfg.Rack, Endpoints: b.cfg.Endpoints}}
}

// Node looks up a live broker by id.
func (b *Broker) Node(id int32) (Node, bool) {
	for _, n := range b.Nodes() {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}

// Leader is the partition's leader node and epoch.
func (b *Broker) Leader(topic string, partition int32) (node, epoch int32, ok bool) {
	if b.cfg.Topology != nil {
		return b.cfg.Topology.Leader(topic, partition)
	}
	return b.cfg.NodeID, 0, true
}

// ControllerID is the broker reported as the controller.
func (b *Broker) ControllerID() int32 {
	if b.cfg.Topology != nil {
		return b.cfg.Topology.ControllerID()
	}
	return b.cfg.NodeID
}
