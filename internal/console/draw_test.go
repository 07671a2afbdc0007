package console

import (
	"strings"
	"testing"

	"github.com/sluice-mq/sluice/internal/lag"
	"github.com/sluice-mq/sluice/internal/lineage"
)

func TestLagChart(t *testing.T) {
	if c := lagChart([]lag.Point{{At: 1, Lag: 5}}, func(p lag.Point) float64 { return float64(p.Lag) }, "records"); !c.Empty {
		t.Fatal("one point charted")
	}
	h := []lag.Point{{At: 0, Lag: 0}, {At: 10_000, Lag: 50}, {At: 20_000, Lag: 100}}
	c := lagChart(h, func(p lag.Point) float64 { return float64(p.Lag) }, "records")
	pts := strings.Fields(c.Points)
	if len(pts) != 3 || pts[0] != "40.0,100.0" || pts[2] != "590.0,10.0" || c.Max != "100 records" {
		t.Fatalf("chart %+v", c)
	}
}

func TestDiffLines(t *testing.T) {
	d := diffLines([]string{"a", "b", "c"}, []string{"a", "x", "c", "d"})
	var got []string
	for _, l := range d {
		got = append(got, l.Op+l.Text)
	}
	if strings.Join(got, ",") != " a,-b,+x, c,+d" {
		t.Fatalf("diff %v", got)
	}
}

func TestDrawLineage(t *testing.T) {
	g := drawLineage([]lineage.Edge{
		{Kind: lineage.Produce, ClientID: "api", Principal: "ANONYMOUS", Topic: "orders"},
		{Kind: lineage.Consume, Group: "billing", Topic: "orders"},
		{Kind: lineage.Member, Group: "billing", ClientID: "billing-1"},
	})
	if len(g.Nodes) != 4 || len(g.Edges) != 3 || g.Empty {
		t.Fatalf("graph %+v", g)
	}
	if !drawLineage(nil).Empty {
		t.Fatal("no edges is not empty")
	}
}
