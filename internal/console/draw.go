package console

import (
	"slices"

	"github.com/sluice-mq/sluice/internal/lineage"
)

// graph is the lineage laid out in four columns, in data-flow order:
// producing clients, topics, groups, and the groups' members and
// transactional readers.
type graph struct {
	Width, Height int
	Nodes         []node
	Edges         []edge
	Empty         bool
}

type node struct {
	X, Y   int
	Label  string
	Column int
}

type edge struct {
	X1, Y1, X2, Y2 int
	Label          string
	Dashed         bool
}

const (
	colWidth  = 260
	rowHeight = 34
	nodeWidth = 200
	margin    = 20
)

func drawLineage(edges []lineage.Edge) graph {
	cols := [4][]string{}
	index := map[[2]string]int{} // (column kind, name) -> row
	add := func(col int, name string) (int, int) {
		k := [2]string{string(rune('0' + col)), name}
		if row, ok := index[k]; ok {
			return col, row
		}
		index[k] = len(cols[col])
		cols[col] = append(cols[col], name)
		return col, len(cols[col]) - 1
	}
	type link struct {
		c1, r1, c2, r2 int
		label          string
		dashed         bool
	}
	var links []link
	for _, e := range edges {
		switch e.Kind {
		case lineage.Produce:
			name := e.ClientID
			if e.Principal != "" && e.Principal != "ANONYMOUS" {
				name += " (" + e.Principal + ")"
			}
			c1, r1 := add(0, name)
			c2, r2 := add(1, e.Topic)
			links = append(links, link{c1, r1, c2, r2, "produces", false})
		case lineage.Consume:
			c1, r1 := add(1, e.Topic)
			c2, r2 := add(2, e.Group)
			links = append(links, link{c1, r1, c2, r2, "consumed by", false})
		case lineage.Member:
			c1, r1 := add(2, e.Group)
			c2, r2 := add(3, e.ClientID)
			links = append(links, link{c1, r1, c2, r2, "member", true})
		case lineage.TxnRead:
			c1, r1 := add(2, e.Group)
			c2, r2 := add(3, "txn "+e.TransactionalID)
			links = append(links, link{c1, r1, c2, r2, "offsets by", true})
		}
	}
	g := graph{Empty: len(edges) == 0}
	rows := 0
	for _, c := range cols {
		rows = max(rows, len(c))
	}
	g.Width = 2*margin + 3*colWidth + nodeWidth
	g.Height = 2*margin + rows*rowHeight + 30
	pos := func(col, row int) (int, int) { return margin + col*colWidth, margin + 30 + row*rowHeight }
	for col, names := range cols {
		for row, name := range names {
			x, y := pos(col, row)
			g.Nodes = append(g.Nodes, node{X: x, Y: y, Label: name, Column: col})
		}
	}
	for _, l := range links {
		x1, y1 := pos(l.c1, l.r1)
		x2, y2 := pos(l.c2, l.r2)
		g.Edges = append(g.Edges, edge{X1: x1 + nodeWidth, Y1: y1 + 12, X2: x2, Y2: y2 + 12, Label: l.label, Dashed: l.dashed})
	}
	slices.SortStableFunc(g.Nodes, func(a, b node) int { return a.Column - b.Column })
	return g
}
