package group

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

var rewrite = flag.Bool("rewrite", false, "rewrite testdata expectations")

// harness drives a coordinator with a fake clock, a memory store and
// inline effects, from testdata scripts.
type harness struct {
	t     *testing.T
	cfg   Config
	store *memStore
	c     *Coordinator
	now   time.Time
	ids   map[string]string // alias -> member id
	joins map[string]<-chan JoinResult
	syncs map[string]<-chan SyncResult
	gen   map[string]int32
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, cfg: DefaultConfig(), store: &memStore{}, now: time.Unix(1_700_000_000, 0),
		ids: map[string]string{}, joins: map[string]<-chan JoinResult{}, syncs: map[string]<-chan SyncResult{}, gen: map[string]int32{}}
	h.cfg.OffsetsTopicPartitions = 4
	h.cfg.InitialRebalanceDelay = 0
	h.start()
	return h
}

func (h *harness) start() {
	c, err := New(h.cfg, h.store, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		h.t.Fatal(err)
	}
	c.manual = true
	c.now = func() time.Time { return h.now }
	c.spawn = func(f func()) { f() }
	if err := c.load(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	c.loading.Store(false)
	h.c = c
}

var aliasRE = regexp.MustCompile(`([a-z][a-z0-9]*)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)

// show replaces member ids with the alias that joined with them.
func (h *harness) show(s string) string {
	return aliasRE.ReplaceAllStringFunc(s, func(id string) string {
		for a, x := range h.ids {
			if x == id {
				return a
			}
		}
		return "?" + id[:strings.IndexByte(id, '-')]
	})
}

func errName(err error) string {
	if err == nil {
		return "ok"
	}
	s := err.Error()
	s = strings.TrimPrefix(s, "group: ")
	if i := strings.Index(s, ":"); i > 0 {
		s = s[:i]
	}
	return strings.ReplaceAll(s, " ", "_")
}

func (h *harness) joinOut(alias string, r JoinResult) string {
	if r.Err != nil {
		if r.MemberID != "" && h.ids[alias] == "" {
			h.ids[alias] = r.MemberID
		}
		return fmt.Sprintf("%s: join %s", alias, errName(r.Err))
	}
	h.ids[alias] = r.MemberID
	h.gen[alias] = r.Generation
	s := fmt.Sprintf("%s: joined gen=%d protocol=%s leader=%s", alias, r.Generation, r.Protocol, h.show(r.Leader))
	if r.SkipAssignment {
		s += " skip-assignment"
	}
	if len(r.Members) > 0 {
		var ms []string
		for _, m := range r.Members {
			ms = append(ms, h.show(m.MemberID)+"="+string(m.Metadata))
		}
		s += " members=" + strings.Join(ms, ",")
	}
	return s
}

func (h *harness) collect(out *strings.Builder) {
	var aliases []string
	for a := range h.joins {
		aliases = append(aliases, a)
	}
	sort.Strings(aliases)
	got := map[string]JoinResult{}
	for _, a := range aliases {
		select {
		case r := <-h.joins[a]:
			delete(h.joins, a)
			got[a] = r
			if r.MemberID != "" && (r.Err == nil || h.ids[a] == "") {
				h.ids[a] = r.MemberID
			}
		default:
		}
	}
	for _, a := range aliases {
		if r, ok := got[a]; ok {
			fmt.Fprintln(out, h.joinOut(a, r))
		}
	}
	aliases = aliases[:0]
	for a := range h.syncs {
		aliases = append(aliases, a)
	}
	sort.Strings(aliases)
	for _, a := range aliases {
		select {
		case r := <-h.syncs[a]:
			delete(h.syncs, a)
			if r.Err != nil {
				fmt.Fprintf(out, "%s: sync %s\n", a, errName(r.Err))
			} else {
				fmt.Fprintf(out, "%s: synced assignment=%q\n", a, r.Assignment)
			}
		default:
		}
	}
}

func args(fields []string) map[string]string {
	m := map[string]string{}
	for _, f := range fields {
		k, v, _ := strings.Cut(f, "=")
		m[k] = v
	}
	return m
}

func dur(s, def string) time.Duration {
	if s == "" {
		s = def
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return d
}

func ptr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func (h *harness) run(line string) string {
	var out strings.Builder
	f := strings.Fields(line)
	a := args(f[1:])
	grp := a["group"]
	if grp == "" {
		grp = "g"
	}
	alias := a["m"]
	switch f[0] {
	case "config":
		for k, v := range a {
			switch k {
			case "initial-delay":
				h.cfg.InitialRebalanceDelay = dur(v, "")
			case "retention":
				h.cfg.OffsetsRetention = dur(v, "")
			case "max-size":
				h.cfg.MaxSize, _ = strconv.Atoi(v)
			}
		}
		h.c.cfg = h.cfg
	case "join":
		protos := []Protocol{}
		for _, p := range strings.Split(or(a["protocols"], "range"), ",") {
			protos = append(protos, Protocol{Name: p, Metadata: []byte(or(a["meta"], alias))})
		}
		member := ""
		if _, ok := a["known"]; ok {
			member = h.ids[alias]
		}
		if v, ok := a["member"]; ok {
			member = h.ids[v]
		}
		r := JoinRequest{Group: grp, MemberID: member, InstanceID: ptr(a["instance"]), ProtocolType: or(a["type"], "consumer"),
			Protocols: protos, SessionTimeout: dur(a["session"], "10s"), RebalanceTimeout: dur(a["rebalance"], "30s"),
			ClientID: alias, ClientHost: "/127.0.0.1", RequireKnownMemberID: a["v"] != "3"}
		h.joins[alias] = h.c.Join(context.Background(), r)
	case "sync":
		assign := map[string][]byte{}
		for _, kv := range strings.Split(a["assign"], ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok {
				assign[h.ids[k]] = []byte(v)
			}
		}
		gen := h.gen[alias]
		if g, ok := a["gen"]; ok {
			n, _ := strconv.Atoi(g)
			gen = int32(n)
		}
		h.syncs[alias] = h.c.Sync(SyncRequest{Group: grp, MemberID: h.ids[alias], InstanceID: ptr(a["instance"]), Generation: gen, Assignments: assign})
	case "heartbeat":
		gen := h.gen[alias]
		if g, ok := a["gen"]; ok {
			n, _ := strconv.Atoi(g)
			gen = int32(n)
		}
		member := h.ids[alias]
		if v, ok := a["member"]; ok {
			member = h.ids[v]
		}
		fmt.Fprintf(&out, "%s: heartbeat %s\n", alias, errName(h.c.Heartbeat(grp, member, ptr(a["instance"]), gen)))
	case "leave":
		var ms []LeaveMember
		for _, x := range strings.Split(alias, ",") {
			ms = append(ms, LeaveMember{MemberID: h.ids[x], InstanceID: ptr(a["instance"])})
		}
		top, errs := h.c.Leave(grp, ms)
		if top != nil {
			fmt.Fprintf(&out, "leave %s\n", errName(top))
		}
		for i, e := range errs {
			fmt.Fprintf(&out, "%s: leave %s\n", strings.Split(alias, ",")[i], errName(e))
		}
	case "commit":
		gen := int32(-1)
		member := ""
		if alias != "" {
			gen, member = h.gen[alias], h.ids[alias]
		}
		if g, ok := a["gen"]; ok {
			n, _ := strconv.Atoi(g)
			gen = int32(n)
		}
		var ps []CommitPartition
		for _, kv := range strings.Split(a["offsets"], ",") {
			tpart, off, _ := strings.Cut(kv, "=")
			t, p, _ := strings.Cut(tpart, "/")
			pn, _ := strconv.Atoi(p)
			on, _ := strconv.ParseInt(off, 10, 64)
			ps = append(ps, CommitPartition{Topic: t, Partition: int32(pn), Offset: on, LeaderEpoch: -1})
		}
		errs := <-h.c.Commit(context.Background(), CommitRequest{Group: grp, MemberID: member, InstanceID: ptr(a["instance"]), Generation: gen, RetentionMs: -1, Partitions: ps})
		var es []string
		for _, e := range errs {
			es = append(es, errName(e))
		}
		fmt.Fprintf(&out, "commit %s\n", strings.Join(es, ","))
	case "fetch":
		offs, err := h.c.FetchOffsets(grp, nil)
		if err != nil {
			fmt.Fprintf(&out, "fetch %s\n", errName(err))
		}
		var s []string
		for _, o := range offs {
			s = append(s, fmt.Sprintf("%s/%d=%d", o.Topic, o.Partition, o.Offset))
		}
		fmt.Fprintf(&out, "offsets: %s\n", strings.Join(s, " "))
	case "advance":
		h.now = h.now.Add(dur(f[1], ""))
		h.c.tickAll()
	case "expire":
		h.c.ExpireOffsets()
	case "describe":
		d := h.c.Describe([]string{grp})[0]
		var ms []string
		for _, m := range d.Members {
			s := h.show(m.MemberID)
			if m.InstanceID != nil {
				s += "(" + *m.InstanceID + ")"
			}
			if m.Assignment != nil {
				s += fmt.Sprintf("=%q", m.Assignment)
			}
			ms = append(ms, s)
		}
		fmt.Fprintf(&out, "%s state=%s type=%s protocol=%s members=[%s]\n", d.Group, d.State, d.ProtocolType, d.Protocol, strings.Join(ms, " "))
	case "list":
		ls, _ := h.c.List()
		for _, l := range ls {
			fmt.Fprintf(&out, "%s %s %s\n", l.Group, l.State, l.ProtocolType)
		}
	case "delete":
		for i, e := range h.c.DeleteGroups(strings.Split(grp, ","))() {
			fmt.Fprintf(&out, "delete %s: %s\n", strings.Split(grp, ",")[i], errName(e))
		}
	case "delete-offsets":
		var tps []TopicPartitions
		for _, t := range strings.Split(a["topics"], ",") {
			tps = append(tps, TopicPartitions{Topic: t, Partitions: []int32{0}})
		}
		top, wait := h.c.DeleteOffsets(grp, tps)
		if top != nil {
			fmt.Fprintf(&out, "delete-offsets %s\n", errName(top))
			break
		}
		for i, es := range wait() {
			fmt.Fprintf(&out, "delete-offsets %s: %s\n", tps[i].Topic, errName(es[0]))
		}
	case "restart":
		h.c.manual = true
		h.c.closed.Store(true)
		h.start()
		h.joins = map[string]<-chan JoinResult{}
		h.syncs = map[string]<-chan SyncResult{}
	case "fail-store":
		h.store.mu.Lock()
		h.store.fail = nil
		if f[1] == "on" {
			h.store.fail = fmt.Errorf("injected")
		}
		h.store.mu.Unlock()
	default:
		h.t.Fatalf("unknown command %q", f[0])
	}
	h.collect(&out)
	return out.String()
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// TestScripts runs testdata/*.txt: blocks of commands, "----", and the
// expected output up to a blank line. go test -run TestScripts -rewrite
// regenerates the expectations.
func TestScripts(t *testing.T) {
	files, _ := filepath.Glob("testdata/*.txt")
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			h := newHarness(t)
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var rewritten strings.Builder
			sc := bufio.NewScanner(strings.NewReader(string(data)))
			var lines []string
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			for i := 0; i < len(lines); i++ {
				l := lines[i]
				if strings.TrimSpace(l) == "" || strings.HasPrefix(l, "#") {
					rewritten.WriteString(l + "\n")
					continue
				}
				var cmds []string
				for ; i < len(lines) && lines[i] != "----"; i++ {
					cmds = append(cmds, lines[i])
				}
				var want []string
				for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ""; i++ {
					want = append(want, lines[i])
				}
				var got strings.Builder
				for _, c := range cmds {
					got.WriteString(h.run(c))
				}
				g := strings.TrimRight(got.String(), "\n")
				if g != strings.Join(want, "\n") && !*rewrite {
					t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", file, i, strings.Join(cmds, "; "), g, strings.Join(want, "\n"))
				}
				rewritten.WriteString(strings.Join(cmds, "\n") + "\n----\n")
				if g != "" {
					rewritten.WriteString(g + "\n")
				}
				rewritten.WriteString("\n")
			}
			if *rewrite {
				os.WriteFile(file, []byte(strings.TrimRight(rewritten.String(), "\n")+"\n"), 0o644)
			}
		})
	}
}
