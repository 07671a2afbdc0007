package console

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/acl"
	"github.com/sluice-mq/sluice/internal/security"
)

type securityData struct {
	Refused    bool
	Users      []security.User
	ACLsOn     bool
	ACLs       []acl.Binding
	Quotas     []quotaRow
	Done       string
	Mechanisms []string
	Types      []string
	Operations []string
	QuotaKeys  []string
}

// quotaRow is one quota key of one entity.
type quotaRow struct {
	Entity     string // as shown
	EntityJSON string // as the API takes it
	Key        string
	Value      float64
}

func (c *Console) security(w http.ResponseWriter, r *http.Request, s *session) {
	c.securityPage(w, r, s, "", nil)
}

// securityPage shows users, ACLs and quotas, with what an action did or
// its error.
func (c *Console) securityPage(w http.ResponseWriter, r *http.Request, s *session, done string, actionErr error) {
	d := securityData{Done: done, Mechanisms: []string{"SCRAM-SHA-512", "SCRAM-SHA-256"},
		Types:      []string{"TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID", "DELEGATION_TOKEN", "USER"},
		Operations: []string{"ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"},
		QuotaKeys:  []string{"producer_byte_rate", "consumer_byte_rate"}}
	var users struct{ Users []security.User }
	code, err := c.call(r, s, "GET", "/v1/security/users", nil, &users)
	if code == http.StatusForbidden {
		d.Refused = true
		if actionErr == nil {
			actionErr = err
		}
		c.page(w, s, http.StatusForbidden, "security", "Security", d, actionErr)
		return
	}
	d.Users = users.Users
	var acls struct {
		Enabled bool          `json:"enabled"`
		ACLs    []acl.Binding `json:"acls"`
	}
	if _, e := c.call(r, s, "GET", "/v1/security/acls", nil, &acls); e != nil && err == nil {
		err = e
	}
	d.ACLsOn, d.ACLs = acls.Enabled, acls.ACLs
	var quotas struct{ Quotas []security.Quota }
	if _, e := c.call(r, s, "GET", "/v1/security/quotas", nil, &quotas); e != nil && err == nil {
		err = e
	}
	for _, q := range quotas.Quotas {
		var parts []string
		row := quotaRow{}
		for _, p := range q.Entity {
			name := "<default>"
			if p.Name != nil {
				name = *p.Name
			}
			parts = append(parts, p.Type+"="+name)
		}
		row.Entity = strings.Join(parts, ", ")
		ej, _ := json.Marshal(q.Entity)
		row.EntityJSON = string(ej)
		keys := make([]string, 0, len(q.Values))
		for k := range q.Values {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			row.Key, row.Value = k, q.Values[k]
			d.Quotas = append(d.Quotas, row)
		}
	}
	if actionErr != nil {
		err = actionErr
	}
	code = http.StatusOK
	if actionErr != nil {
		code = http.StatusBadRequest
	}
	c.page(w, s, code, "security", "Security", d, err)
}

// securityAction runs one change through the API and shows the page.
func (c *Console) securityAction(w http.ResponseWriter, r *http.Request, s *session, path string, body any, done string) {
	if _, err := c.call(r, s, "POST", path, body, nil); err != nil {
		c.securityPage(w, r, s, "", err)
		return
	}
	c.securityPage(w, r, s, done, nil)
}

func (c *Console) createUser(w http.ResponseWriter, r *http.Request, s *session) {
	user := r.PostFormValue("user")
	body := security.UserRequest{User: user, Password: r.PostFormValue("password"), Mechanism: r.PostFormValue("mechanism")}
	c.securityAction(w, r, s, "/v1/security/users", body, "saved the credential of "+user)
}

func (c *Console) deleteUser(w http.ResponseWriter, r *http.Request, s *session) {
	user := r.PostFormValue("user")
	c.securityAction(w, r, s, "/v1/security/users/"+url.PathEscape(user)+"/delete", nil, "deleted user "+user)
}

// formBinding is the binding the form's fields name.
func formBinding(r *http.Request) map[string]string {
	b := map[string]string{}
	for _, k := range []string{"resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission"} {
		b[k] = strings.TrimSpace(r.PostFormValue(k))
	}
	if b["host"] == "" {
		b["host"] = "*"
	}
	if b["resource_type"] == "CLUSTER" && b["resource_name"] == "" {
		b["resource_name"] = acl.ClusterName
	}
	if p := b["principal"]; p != "" && !strings.Contains(p, ":") {
		b["principal"] = "User:" + p
	}
	return b
}

func (c *Console) createACL(w http.ResponseWriter, r *http.Request, s *session) {
	b := formBinding(r)
	c.securityAction(w, r, s, "/v1/security/acls", b, fmt.Sprintf("created: %s %s %s on %s %s", b["principal"], b["permission"], b["operation"], b["resource_type"], b["resource_name"]))
}

func (c *Console) deleteACL(w http.ResponseWriter, r *http.Request, s *session) {
	b := formBinding(r)
	c.securityAction(w, r, s, "/v1/security/acls/delete", b, fmt.Sprintf("deleted: %s %s %s on %s %s", b["principal"], b["permission"], b["operation"], b["resource_type"], b["resource_name"]))
}

// alterQuota sets (a value) or removes (remove=1) one quota key of the
// entity the form names (an empty name: the type's default).
func (c *Console) alterQuota(w http.ResponseWriter, r *http.Request, s *session) {
	typ, name, key := r.PostFormValue("entity_type"), strings.TrimSpace(r.PostFormValue("entity_name")), r.PostFormValue("key")
	part := security.EntityPart{Type: typ}
	if name != "" {
		part.Name = &name
	}
	req := security.QuotaRequest{Entity: []security.EntityPart{part}}
	shown := typ + "=" + name
	if name == "" {
		shown = typ + "=<default>"
	}
	if r.PostFormValue("remove") != "" {
		// A listed entity, as the API answered it.
		req.Entity = nil
		if err := json.Unmarshal([]byte(r.PostFormValue("entity")), &req.Entity); err != nil {
			c.securityPage(w, r, s, "", fmt.Errorf("bad quota entity: %v", err))
			return
		}
		shown = r.PostFormValue("entity")
		req.Remove = []string{key}
		c.securityAction(w, r, s, "/v1/security/quotas", req, "removed "+key+" of "+shown)
		return
	}
	v, err := strconv.ParseFloat(strings.TrimSpace(r.PostFormValue("value")), 64)
	if err != nil {
		c.securityPage(w, r, s, "", fmt.Errorf("bad quota value %q", r.PostFormValue("value")))
		return
	}
	req.Set = map[string]float64{key: v}
	c.securityAction(w, r, s, "/v1/security/quotas", req, fmt.Sprintf("set %s of %s to %.0f", key, shown, v))
}
