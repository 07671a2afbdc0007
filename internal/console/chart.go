package console

import (
	"fmt"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/lag"
)

// chart is a line chart drawn server-side as SVG.
type chart struct {
	Width, Height int
	Points        string // polyline points
	Max           string // the y axis' top label
	From, To      string // the x axis' ends
	Empty         bool
}

// lagChart charts value(p) of the samples, 600x120.
func lagChart(h []lag.Point, value func(lag.Point) float64, unit string) chart {
	c := chart{Width: 600, Height: 120, Empty: len(h) < 2}
	if c.Empty {
		return c
	}
	top := 0.0
	for _, p := range h {
		top = max(top, value(p))
	}
	if top == 0 {
		top = 1
	}
	t0, t1 := h[0].At, h[len(h)-1].At
	span := float64(max(t1-t0, 1))
	var pts []string
	for _, p := range h {
		x := 40 + float64(p.At-t0)/span*float64(c.Width-50)
		y := 10 + (1-value(p)/top)*float64(c.Height-30)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	c.Points = strings.Join(pts, " ")
	c.Max = fmt.Sprintf("%.0f %s", top, unit)
	c.From = time.UnixMilli(t0).UTC().Format("15:04:05")
	c.To = time.UnixMilli(t1).UTC().Format("15:04:05")
	return c
}
