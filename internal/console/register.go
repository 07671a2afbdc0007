package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// registerSchema registers the form's schema as a new version of a
// subject (POST /subjects/{subject}/versions): from the subject page, or
// a new subject from the schemas page. A refusal is shown with the
// registry's message and, for an incompatible schema, why (a verbose
// compatibility check).
func (c *Console) registerSchema(w http.ResponseWriter, r *http.Request, s *session) {
	if c.registry == nil {
		c.page(w, s, http.StatusOK, "schemas", "Schemas", schemasData{}, errNoRegistry)
		return
	}
	sub := r.PathValue("subject")
	if sub == "" {
		sub = strings.TrimSpace(r.PostFormValue("subject"))
	}
	text := r.PostFormValue("schema")
	body := map[string]any{"schema": text}
	if t := r.PostFormValue("schemaType"); t != "" && t != "AVRO" {
		body["schemaType"] = t
	}
	if sub == "" {
		c.page(w, s, http.StatusBadRequest, "schemas", "Schemas", schemasData{}, fmt.Errorf("name the subject"))
		return
	}
	var res struct {
		ID int `json:"id"`
	}
	base := "/subjects/" + url.PathEscape(sub)
	code, err := c.callOn(c.registry, r, s, "POST", base+"/versions", body, &res)
	if err == nil {
		http.Redirect(w, r, "/ui/schemas/"+url.PathEscape(sub)+"?registered="+fmt.Sprint(res.ID), http.StatusSeeOther)
		return
	}
	var messages []string
	if code == http.StatusConflict {
		var check struct {
			Messages []string `json:"messages"`
		}
		c.callOn(c.registry, r, s, "POST", "/compatibility"+base+"/versions/latest?verbose=true", body, &check)
		messages = check.Messages
	}
	d, lcode, lerr := c.loadSubject(r, s, sub, "")
	if d.Refused {
		// Not even readable: the refusal page, saying the registration
		// was refused too.
		c.page(w, s, lcode, "subject", sub, d, fmt.Errorf("not registered: %v; %v", err, lerr))
		return
	}
	d.Candidate, d.CandidateType = text, r.PostFormValue("schemaType")
	d.RegisterError, d.RegisterMessages = err.Error(), messages
	if code < 400 {
		code = http.StatusBadRequest
	}
	c.page(w, s, code, "subject", sub, d, nil)
}
