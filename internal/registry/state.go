package registry

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/sluice-mq/sluice/internal/schema"
)

// content is one schema id: what every version with that id holds.
type content struct {
	id     int
	typ    schema.Type
	text   string
	refs   []Reference
	parsed *schema.Schema // nil when this build cannot parse it
	key    string         // identity: type, canonical text, references
	uses   int            // versions, soft-deleted ones included, with this id
	info   *SchemaInfo    // what SchemaByID returns
}

type version struct {
	version int
	id      int
	deleted bool
}

// state is the registry as _schemas says it is, up to applied.
type state struct {
	schemas  map[int]*content
	byKey    map[string]int
	subjects map[string][]*version // sorted by version
	configs  map[string]schema.Level
	modes    map[string]string
	maxID    int
	// usedBy: the subjects with a version of each id, soft-deleted ones
	// included (authz.go, kept by reindex).
	usedBy map[int]map[string]struct{}
}

func newState() *state {
	return &state{schemas: map[int]*content{}, byKey: map[string]int{}, subjects: map[string][]*version{},
		configs: map[string]schema.Level{}, modes: map[string]string{}}
}

// identity is the key that makes two registrations the same schema.
func identity(t schema.Type, canonical string, refs []Reference) string {
	var r []byte
	if len(refs) > 0 { // no references and "references": [] are the same
		r, _ = json.Marshal(refs)
	}
	return string(t) + "\x00" + canonical + "\x00" + string(r)
}

// resolveRefs is the text of every schema refs name, transitively,
// keyed by reference name, as the format parsers take them.
func (st *state) resolveRefs(refs []Reference) (map[string]string, *Error) {
	out := map[string]string{}
	var walk func(refs []Reference, depth int) *Error
	walk = func(refs []Reference, depth int) *Error {
		if depth > 32 {
			return errInvalidSchema("Invalid schema: references nest more than 32 deep")
		}
		for _, ref := range refs {
			v := st.version(ref.Subject, ref.Version, true)
			if ref.Name == "" || v == nil {
				return errInvalidSchema("Invalid schema: reference %q to subject '%s' version %d not found", ref.Name, ref.Subject, ref.Version)
			}
			c := st.schemas[v.id]
			if _, seen := out[ref.Name]; seen {
				continue
			}
			out[ref.Name] = c.text
			if err := walk(c.refs, depth+1); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(refs, 0); err != nil {
		return nil, err
	}
	return out, nil
}

// version finds a subject's version; v -1 is the latest. Soft-deleted
// versions count only with deleted.
func (st *state) version(subject string, v int, deleted bool) *version {
	vs := st.subjects[subject]
	if v == -1 {
		for i := len(vs) - 1; i >= 0; i-- {
			if deleted || !vs[i].deleted {
				return vs[i]
			}
		}
		return nil
	}
	i, ok := slices.BinarySearchFunc(vs, v, func(x *version, v int) int { return x.version - v })
	if !ok || (vs[i].deleted && !deleted) {
		return nil
	}
	return vs[i]
}

// live are the subject's versions, soft-deleted ones only with deleted.
func (st *state) live(subject string, deleted bool) []*version {
	var out []*version
	for _, v := range st.subjects[subject] {
		if deleted || !v.deleted {
			out = append(out, v)
		}
	}
	return out
}

func (st *state) level(subject string) schema.Level {
	if l, ok := st.configs[subject]; ok {
		return l
	}
	if l, ok := st.configs[""]; ok {
		return l
	}
	return schema.DefaultLevel
}

func (st *state) mode(subject string) string {
	if m, ok := st.modes[subject]; ok {
		return m
	}
	if m, ok := st.modes[""]; ok {
		return m
	}
	return modeReadWrite
}

// subjectNames lists subjects with a version (soft-deleted ones with
// deleted) whose name starts with prefix, sorted.
func (st *state) subjectNames(prefix string, deleted bool) []string {
	out := []string{}
	for s := range st.subjects {
		if strings.HasPrefix(s, prefix) && len(st.live(s, deleted)) > 0 {
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// newContent builds the content of a schema id, parsing it with the
// references as the state holds them now.
func (st *state) newContent(id int, t schema.Type, text string, refs []Reference) *content {
	c := &content{id: id, typ: t, text: text, refs: refs}
	canonical := text
	if rm, err := st.resolveRefs(refs); err == nil {
		if p, err := schema.Parse(t, text, rm); err == nil {
			c.parsed, canonical = p, p.Canonical()
		}
	}
	c.key = identity(t, canonical, refs)
	c.info = &SchemaInfo{ID: id, Type: t, Schema: text, References: refs, Parsed: c.parsed}
	return c
}
