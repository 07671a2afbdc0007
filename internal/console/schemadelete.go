package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// deleteRequest is a schema delete from the subject page: a version (0:
// the whole subject), soft or permanent.
type deleteRequest struct {
	Version   int
	Permanent bool
}

// What names the delete for the confirmation and the outcome.
func (d deleteRequest) What() string {
	what := "the subject (all its versions)"
	if d.Version > 0 {
		what = "version " + strconv.Itoa(d.Version)
	}
	if d.Permanent {
		return what + " permanently"
	}
	return what
}

// deleteSchema deletes a version or a whole subject through the registry
// (DELETE /subjects/{subject}[/versions/{version}][?permanent=true]), as
// the session's principal: the registry asks ALTER on the subject's topic,
// and, as Confluent's, deletes permanently only what was soft-deleted
// first. A POST without confirm=yes only shows what it would delete and a
// button to confirm.
func (c *Console) deleteSchema(w http.ResponseWriter, r *http.Request, s *session) {
	if c.registry == nil {
		c.page(w, s, http.StatusOK, "subject", "Schemas", subjectData{}, errNoRegistry)
		return
	}
	sub := r.PathValue("subject")
	var req deleteRequest
	if v := r.PostFormValue("version"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			d, code, lerr := c.loadSubject(r, s, sub, "")
			if lerr == nil {
				code, lerr = http.StatusBadRequest, fmt.Errorf("version %q: a version is a number from 1", v)
			}
			c.page(w, s, code, "subject", sub, d, lerr)
			return
		}
		req.Version = n
	}
	switch p := r.PostFormValue("permanent"); p {
	case "", "false":
	case "true":
		req.Permanent = true
	default:
		d, code, lerr := c.loadSubject(r, s, sub, "")
		if lerr == nil {
			code, lerr = http.StatusBadRequest, fmt.Errorf("permanent %q: true or false", p)
		}
		c.page(w, s, code, "subject", sub, d, lerr)
		return
	}
	if r.PostFormValue("confirm") != "yes" {
		shown := ""
		if req.Version > 0 {
			shown = strconv.Itoa(req.Version)
		}
		d, code, err := c.loadSubject(r, s, sub, shown)
		if err == nil {
			d.Confirm = &req
		}
		c.page(w, s, code, "subject", sub, d, err)
		return
	}
	path := "/subjects/" + url.PathEscape(sub)
	if req.Version > 0 {
		path += "/versions/" + strconv.Itoa(req.Version)
	}
	if req.Permanent {
		path += "?permanent=true"
	}
	code, err := c.callOn(c.registry, r, s, "DELETE", path, nil, nil)
	if err != nil {
		d, lcode, lerr := c.loadSubject(r, s, sub, "")
		if d.Refused {
			code, err = lcode, fmt.Errorf("not deleted: %v; %v", err, lerr)
		} else {
			err = fmt.Errorf("not deleted: %w", err)
		}
		c.page(w, s, max(code, http.StatusBadRequest), "subject", sub, d, err)
		return
	}
	q := url.Values{}
	if req.Version > 0 {
		q.Set("deletedVersion", strconv.Itoa(req.Version))
	}
	if req.Permanent {
		q.Set("permanent", "true")
	}
	// Back to the subject while it has versions left, soft-deleted ones
	// included; else to the list.
	var left []int
	if _, err := c.callOn(c.registry, r, s, "GET", "/subjects/"+url.PathEscape(sub)+"/versions?deleted=true", nil, &left); err != nil || len(left) == 0 {
		q.Set("deleted", sub)
		http.Redirect(w, r, "/ui/schemas?"+q.Encode(), http.StatusSeeOther)
		return
	}
	if req.Version == 0 {
		q.Set("deletedSubject", "true")
	}
	http.Redirect(w, r, "/ui/schemas/"+url.PathEscape(sub)+"?"+q.Encode(), http.StatusSeeOther)
}

// doneMessage says what a delete did, from the query its redirect carries.
func doneMessage(q url.Values) string {
	req := deleteRequest{Permanent: q.Get("permanent") == "true"}
	switch {
	case q.Get("deletedSubject") == "true":
	case q.Get("deletedVersion") != "":
		n, err := strconv.Atoi(q.Get("deletedVersion"))
		if err != nil || n <= 0 {
			return ""
		}
		req.Version = n
	default:
		return ""
	}
	if req.Permanent {
		return "Deleted " + req.What() + "."
	}
	return "Deleted " + req.What() + " (soft: still listed as deleted here; a permanent delete removes it for good)."
}
