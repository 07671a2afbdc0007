package lineage

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-mq/sluice/internal/adminapi"
)

// client names a producing or consuming client: its id, and its principal
// when it is not the anonymous one.
func client(id, principal string) string {
	if id == "" {
		id = "(no client id)"
	}
	if principal == "" || principal == "ANONYMOUS" {
		return id
	}
	return id + " (User:" + principal + ")"
}

// WriteText writes the edges grouped as a pipeline reads: who produces to
// each topic, and who consumes it.
func WriteText(w io.Writer, edges []Edge) {
	ago := func(ms int64) string {
		if ms == 0 {
			return "-"
		}
		return time.UnixMilli(ms).UTC().Format(time.RFC3339)
	}
	section := func(title, kind string, line func(Edge) string) {
		var lines []string
		for _, e := range edges {
			if e.Kind == kind {
				lines = append(lines, fmt.Sprintf("  %s   (first %s, last %s)", line(e), ago(e.FirstSeen), ago(e.LastSeen)))
			}
		}
		if len(lines) == 0 {
			return
		}
		fmt.Fprintf(w, "%s:\n%s\n", title, strings.Join(lines, "\n"))
	}
	section("producers", Produce, func(e Edge) string { return client(e.ClientID, e.Principal) + " -> " + e.Topic })
	section("consumers", Consume, func(e Edge) string { return e.Topic + " -> group " + e.Group })
	section("group members", Member, func(e Edge) string { return "group " + e.Group + ": " + client(e.ClientID, "") })
	section("transactional readers", TxnRead, func(e Edge) string {
		return "group " + e.Group + " -> transactional id " + e.TransactionalID
	})
}

// WriteDOT writes the edges as a Graphviz digraph in data-flow order:
// producing clients -> topics -> groups -> member clients, and groups ->
// the transactional producers that commit their offsets.
func WriteDOT(w io.Writer, edges []Edge) {
	q := strconv.Quote
	fmt.Fprintln(w, "digraph lineage {")
	fmt.Fprintln(w, "  rankdir=LR;")
	nodes := map[string]string{}
	node := func(id, label, shape string) string {
		if _, ok := nodes[id]; !ok {
			nodes[id] = shape
			fmt.Fprintf(w, "  %s [label=%s, shape=%s];\n", q(id), q(label), shape)
		}
		return q(id)
	}
	for _, e := range edges {
		switch e.Kind {
		case Produce:
			c := node("client:"+e.ClientID+"|"+e.Principal, client(e.ClientID, e.Principal), "box")
			fmt.Fprintf(w, "  %s -> %s [label=\"produces\"];\n", c, node("topic:"+e.Topic, e.Topic, "cylinder"))
		case Consume:
			fmt.Fprintf(w, "  %s -> %s [label=\"consumed by\"];\n", node("topic:"+e.Topic, e.Topic, "cylinder"),
				node("group:"+e.Group, "group "+e.Group, "ellipse"))
		case Member:
			fmt.Fprintf(w, "  %s -> %s [label=\"member\", style=dashed];\n", node("group:"+e.Group, "group "+e.Group, "ellipse"),
				node("member:"+e.ClientID, e.ClientID, "box"))
		case TxnRead:
			fmt.Fprintf(w, "  %s -> %s [label=\"offsets committed by\", style=dashed];\n", node("group:"+e.Group, "group "+e.Group, "ellipse"),
				node("txn:"+e.TransactionalID, "transactional id "+e.TransactionalID, "box"))
		}
	}
	fmt.Fprintln(w, "}")
}

// Handler serves GET /v1/lineage (JSON; ?format=dot for Graphviz, ?format=text).
func (r *Recorder) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lineage", func(w http.ResponseWriter, req *http.Request) {
		edges, err := r.Graph(req.Context())
		if err != nil {
			adminapi.Error(w, http.StatusServiceUnavailable, err.Error())
			return
		}
		switch f := req.URL.Query().Get("format"); f {
		case "", "json":
			adminapi.JSON(w, http.StatusOK, map[string]any{"edges": edges, "dropped": r.Dropped()})
		case "dot":
			w.Header().Set("Content-Type", "text/vnd.graphviz; charset=utf-8")
			WriteDOT(w, edges)
		case "text":
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			WriteText(w, edges)
		default:
			adminapi.Error(w, http.StatusBadRequest, "format must be json, dot or text, got "+strconv.Quote(f))
		}
	})
	mux.HandleFunc("GET /v1/lineage/producers/{pid}", func(w http.ResponseWriter, req *http.Request) {
		pid, err := strconv.ParseInt(req.PathValue("pid"), 10, 64)
		if err != nil {
			adminapi.Error(w, http.StatusBadRequest, "producer id must be an integer")
			return
		}
		p, ok := r.Producer(req.Context(), pid)
		if !ok {
			adminapi.Error(w, http.StatusNotFound, "producer id "+strconv.FormatInt(pid, 10)+" is not known")
			return
		}
		adminapi.JSON(w, http.StatusOK, p)
	})
	return mux
}
