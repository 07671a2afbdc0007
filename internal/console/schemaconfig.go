package console

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/sluice-mq/sluice/internal/registry"
)

// settingKind is a registry setting the console shows and changes: a
// compatibility level (/config) or a mode (/mode), of a subject or of the
// whole registry, as Confluent's API has them.
type settingKind struct {
	Name   string   // "compatibility" or "mode": the form's path and the flash's word
	path   string   // "/config" or "/mode"
	field  string   // the field of PUT's body
	answer string   // the field of GET's answer
	Values []string // what the form offers
	// noGlobalReset: the registry-wide value cannot be deleted (DELETE
	// /mode is 405 in Confluent's API as in sluice's).
	noGlobalReset bool
}

var (
	compatibilityKind = &settingKind{Name: "compatibility", path: "/config", field: "compatibility", answer: "compatibilityLevel",
		Values: []string{"BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE", "NONE"}}
	modeKind = &settingKind{Name: "mode", path: "/mode", field: "mode", answer: "mode",
		Values: []string{"READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT"}, noGlobalReset: true}
)

// setting is a subject's level or mode as shown: its own, or the global
// one it inherits.
type setting struct {
	Value     string
	Inherited bool
	Err       string // why it could not be read
}

// String is what the page shows: "FULL" or "global: BACKWARD".
func (s setting) String() string {
	switch {
	case s.Err != "":
		return "unknown (" + s.Err + ")"
	case s.Inherited:
		return "global: " + s.Value
	}
	return s.Value
}

// settingRequest is a change waiting for its confirmation, or refused.
type settingRequest struct {
	Kind    *settingKind
	Subject string // "": the registry-wide value
	Value   string // the new value ("" with Reset)
	Reset   bool   // back to the global level (a subject) or the default (global)
	Force   bool   // mode IMPORT on a subject that has schemas (?force=true)
}

// Action is the form's path.
func (q settingRequest) Action() string {
	if q.Subject == "" {
		return "/ui/schemas/" + q.Kind.Name
	}
	return "/ui/schemas/" + url.PathEscape(q.Subject) + "/" + q.Kind.Name
}

// What says what the change does, for the confirmation.
func (q settingRequest) What() string {
	of := "the registry-wide " + q.Kind.Name
	if q.Subject != "" {
		of = "the " + q.Kind.Name + " of " + q.Subject
	}
	switch {
	case q.Reset && q.Subject != "":
		return "Reset " + of + " to the global one (remove its own)"
	case q.Reset:
		return "Reset " + of + " to the registry's default (BACKWARD)"
	case q.Force:
		return "Set " + of + " to " + q.Value + " (forced, though it has schemas)"
	}
	return "Set " + of + " to " + q.Value
}

// Effect says what the new value means for writers.
func (q settingRequest) Effect() string {
	if q.Reset {
		return ""
	}
	switch q.Value {
	case "NONE":
		return "Any new schema will be accepted, however incompatible with the versions before it."
	case "BACKWARD", "FORWARD", "FULL":
		return "A new schema will be checked against the latest version only."
	case "BACKWARD_TRANSITIVE", "FORWARD_TRANSITIVE", "FULL_TRANSITIVE":
		return "A new schema will be checked against every version."
	case "READONLY", "READONLY_OVERRIDE":
		return "Registering and deleting schemas will be refused."
	case "IMPORT":
		return "Schemas may then be registered only with their id and version given (for a migration)."
	case "READWRITE":
		return "Schemas may be registered and deleted."
	}
	return ""
}

// loadSetting reads a subject's own level or mode, or the global one it
// inherits (GET /config/{s}, then ?defaultToGlobal=true when it has none
// of its own: 40408 or 40409); subject "" reads the global one.
func (c *Console) loadSetting(r *http.Request, s *session, k *settingKind, subject string) setting {
	var ans map[string]string
	path := k.path
	if subject != "" {
		path += "/" + url.PathEscape(subject)
	}
	_, err := c.callOn(c.registry, r, s, "GET", path, nil, &ans)
	var ae *apiError
	if subject != "" && errors.As(err, &ae) && (ae.Code == 40408 || ae.Code == 40409) {
		_, err = c.callOn(c.registry, r, s, "GET", path+"?defaultToGlobal=true", nil, &ans)
		if err == nil {
			return setting{Value: ans[k.answer], Inherited: true}
		}
	}
	if err != nil {
		return setting{Err: err.Error()}
	}
	return setting{Value: ans[k.answer]}
}

// parseSetting reads the form of a change: value (a level or mode, any
// case; an unknown one goes to the registry, which says why it is
// invalid), reset=yes, force=true, confirm=yes.
func parseSetting(r *http.Request, k *settingKind, subject string) (settingRequest, bool, error) {
	q := settingRequest{Kind: k, Subject: subject, Value: strings.ToUpper(strings.TrimSpace(r.PostFormValue("value")))}
	switch v := r.PostFormValue("reset"); v {
	case "", "no":
	case "yes":
		q.Reset, q.Value = true, ""
	default:
		return q, false, fmt.Errorf("reset %q: yes or no", v)
	}
	switch v := r.PostFormValue("force"); v {
	case "", "false":
	case "true":
		q.Force = k == modeKind && q.Value == "IMPORT"
	default:
		return q, false, fmt.Errorf("force %q: true or false", v)
	}
	switch {
	case q.Reset && subject == "" && k.noGlobalReset:
		return q, false, fmt.Errorf("the registry-wide %s cannot be reset (the registry answers 405 to DELETE %s): set it instead", k.Name, k.path)
	case !q.Reset && q.Value == "":
		return q, false, fmt.Errorf("choose a %s: one of %s, or reset", k.Name, strings.Join(k.Values, ", "))
	case len(q.Value) > 64:
		return q, false, fmt.Errorf("%s %.64q...: not a %s", k.Name, q.Value, k.Name)
	}
	return q, r.PostFormValue("confirm") == "yes", nil
}

// apply sends the change to the registry as the session's principal:
// PUT or DELETE /config[/{s}] or /mode[/{s}].
func (c *Console) apply(r *http.Request, s *session, q settingRequest) (int, error) {
	path := q.Kind.path
	if q.Subject != "" {
		path += "/" + url.PathEscape(q.Subject)
	}
	if q.Reset {
		return c.callOn(c.registry, r, s, "DELETE", path, nil, nil)
	}
	if q.Force {
		path += "?force=true"
	}
	return c.callOn(c.registry, r, s, "PUT", path, map[string]string{q.Kind.field: q.Value}, nil)
}

// refusedSetting names a refused change with the registry's code and
// message, and what the change needs under the registry's ACL rules.
func refusedSetting(q settingRequest, err error) error {
	msg := err.Error()
	var ae *apiError
	if errors.As(err, &ae) && ae.Code != 0 {
		msg = fmt.Sprintf("error %d: %s", ae.Code, ae.Message)
		if ae.Code == 40301 {
			if q.Subject != "" {
				msg += fmt.Sprintf(" (changing a subject's %s needs ALTER on topic %s)", q.Kind.Name, registry.SubjectTopic(q.Subject))
			} else {
				msg += fmt.Sprintf(" (changing the registry-wide %s needs ALTER_CONFIGS on the cluster)", q.Kind.Name)
			}
		}
	}
	return fmt.Errorf("%s not changed: %s", q.Kind.Name, msg)
}

// settingDone says what a change did, from the query its redirect
// carries (set=compatibility|mode, to=VALUE or reset=yes).
func settingDone(v url.Values) string {
	k := v.Get("set")
	if k != compatibilityKind.Name && k != modeKind.Name {
		return ""
	}
	if v.Get("reset") == "yes" {
		return strings.ToUpper(k[:1]) + k[1:] + " reset."
	}
	to := v.Get("to")
	if to == "" || len(to) > 64 {
		return ""
	}
	return strings.ToUpper(k[:1]) + k[1:] + " set to " + to + "."
}

func doneQuery(q settingRequest) string {
	v := url.Values{"set": {q.Kind.Name}}
	if q.Reset {
		v.Set("reset", "yes")
	} else {
		v.Set("to", q.Value)
	}
	return v.Encode()
}

// changeSubjectSetting changes a subject's level or mode. A POST without
// confirm=yes only shows what it would change and a button to confirm.
func (c *Console) changeSubjectSetting(k *settingKind) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		if c.registry == nil {
			c.page(w, s, http.StatusOK, "subject", "Schemas", subjectData{}, errNoRegistry)
			return
		}
		sub := r.PathValue("subject")
		q, confirmed, perr := parseSetting(r, k, sub)
		d, code, err := c.loadSubject(r, s, sub, "")
		switch {
		case d.Refused:
			// Not even readable (ALTER implies DESCRIBE): nothing is sent.
			c.page(w, s, code, "subject", sub, d, fmt.Errorf("%s not changed: %w", k.Name, err))
			return
		case perr != nil:
			c.page(w, s, http.StatusBadRequest, "subject", sub, d, perr)
			return
		case !confirmed:
			d.ConfirmSetting = &q
			c.page(w, s, code, "subject", sub, d, err)
			return
		}
		if code, err := c.apply(r, s, q); err != nil {
			d.SettingError = refusedSetting(q, err).Error()
			c.page(w, s, max(code, http.StatusBadRequest), "subject", sub, d, nil)
			return
		}
		http.Redirect(w, r, "/ui/schemas/"+url.PathEscape(sub)+"?"+doneQuery(q), http.StatusSeeOther)
	}
}

// changeGlobalSetting changes the registry-wide level or mode, from the
// schemas page, confirmed as a subject's.
func (c *Console) changeGlobalSetting(k *settingKind) func(http.ResponseWriter, *http.Request, *session) {
	return func(w http.ResponseWriter, r *http.Request, s *session) {
		if c.registry == nil {
			c.page(w, s, http.StatusOK, "schemas", "Schemas", schemasData{}, errNoRegistry)
			return
		}
		q, confirmed, perr := parseSetting(r, k, "")
		d, err := c.loadSchemas(r, s)
		switch {
		case perr != nil:
			c.page(w, s, http.StatusBadRequest, "schemas", "Schemas", d, perr)
			return
		case !confirmed:
			d.ConfirmSetting = &q
			c.page(w, s, http.StatusOK, "schemas", "Schemas", d, err)
			return
		}
		if code, err := c.apply(r, s, q); err != nil {
			d.SettingError = refusedSetting(q, err).Error()
			c.page(w, s, max(code, http.StatusBadRequest), "schemas", "Schemas", d, nil)
			return
		}
		http.Redirect(w, r, "/ui/schemas?"+doneQuery(q), http.StatusSeeOther)
	}
}

// settingsView is what the "settings" template (layout.html) draws: the
// forms of a subject's (Subject set) or the registry's level and mode,
// and a change's confirmation, refusal or outcome.
type settingsView struct {
	CSRF        string
	Subject     string
	Options     []settingOptions
	Confirm     *settingRequest
	Error, Done string
}

// settingOptions is what a template needs to draw a setting's form.
type settingOptions struct {
	Kind    *settingKind
	Subject string
	Current setting
}

// Action is the form's path.
func (o settingOptions) Action() string {
	return settingRequest{Kind: o.Kind, Subject: o.Subject}.Action()
}

// Resettable: a subject with a value of its own, or the global level.
func (o settingOptions) Resettable() bool {
	if o.Subject == "" {
		return !o.Kind.noGlobalReset
	}
	return !o.Current.Inherited && o.Current.Err == ""
}

// Selected is the value the form's select starts on.
func (o settingOptions) Selected(v string) bool {
	return o.Current.Value == v || o.Current.Value == "" && slices.Index(o.Kind.Values, v) == 0
}
