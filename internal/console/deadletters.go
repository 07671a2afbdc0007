package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/sluice-mq/sluice/internal/deadletter"
	"github.com/sluice-mq/sluice/internal/trace"
)

type deadLettersData struct {
	Topics []deadletter.Topic
}

func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, s *session) {
	var d struct {
		Topics []deadletter.Topic `json:"topics"`
	}
	_, err := c.call(r, s, "GET", "/v1/dlq", nil, &d)
	c.page(w, s, http.StatusOK, "deadletters", "Dead letters", deadLettersData{Topics: d.Topics}, err)
}

type deadLetterData struct {
	Topic     string
	Partition int32
	Records   []trace.Record
	// The replay form's fields, as typed (kept across the dry run).
	Sel replayForm
	// Replay is a replay's answer: a dry run's plan, or what was done.
	Replay *deadletter.ReplayAnswer
}

// replayForm is the replay form's fields.
type replayForm struct {
	Partition, From, To, ErrorMatch, Key, Dest string
	HasKey                                     bool
}

func (c *Console) deadLetter(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	d := deadLetterData{Topic: name}
	code, err := c.loadDeadLetters(r, s, &d, r.URL.Query().Get("partition"), r.URL.Query().Get("offset"))
	c.page(w, s, code, "deadletter", name, d, err)
}

// loadDeadLetters reads a page of the topic's records into d.
func (c *Console) loadDeadLetters(r *http.Request, s *session, d *deadLetterData, partition, offset string) (int, error) {
	p, _ := strconv.ParseInt(partition, 10, 32)
	d.Partition = int32(p)
	q := url.Values{"partition": {strconv.Itoa(int(d.Partition))}}
	if offset != "" {
		q.Set("offset", offset)
	}
	var res trace.Result
	code, err := c.call(r, s, "GET", "/v1/dlq/"+url.PathEscape(d.Topic)+"?"+q.Encode(), nil, &res)
	d.Records = res.Records
	if code < 400 {
		code = http.StatusOK
	}
	return code, err
}

// replay plans (dry run, the default) or runs a replay of the dead
// letters the form selects (POST /v1/dlq/{topic}/replay).
func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	f := replayForm{Partition: strings.TrimSpace(r.PostFormValue("partition")), From: strings.TrimSpace(r.PostFormValue("from")),
		To: strings.TrimSpace(r.PostFormValue("to")), ErrorMatch: r.PostFormValue("error_match"), Key: r.PostFormValue("key"),
		HasKey: r.PostFormValue("has_key") != "", Dest: strings.TrimSpace(r.PostFormValue("dest"))}
	d := deadLetterData{Topic: name, Sel: f}
	body, err := f.request(r.PostFormValue("execute") == "")
	if err == nil {
		var ans deadletter.ReplayAnswer
		if _, err = c.call(r, s, "POST", "/v1/dlq/"+url.PathEscape(name)+"/replay", body, &ans); err == nil {
			d.Replay = &ans
		}
	}
	code, lerr := c.loadDeadLetters(r, s, &d, f.Partition, "")
	if err == nil {
		err = lerr
	}
	if err != nil && code < 400 {
		code = http.StatusBadRequest
	}
	c.page(w, s, code, "deadletter", name, d, err)
}

// request is the API body of the form's selection.
func (f replayForm) request(dryRun bool) (deadletter.ReplayRequest, error) {
	req := deadletter.ReplayRequest{To: f.Dest, DryRun: dryRun}
	req.ErrorMatch = f.ErrorMatch
	if f.HasKey {
		k := f.Key
		req.Key = &k
	}
	if f.Partition != "" {
		p, err := strconv.ParseInt(f.Partition, 10, 32)
		if err != nil {
			return req, errField("partition", f.Partition)
		}
		p32 := int32(p)
		req.Partition = &p32
	}
	if f.From != "" {
		o, err := strconv.ParseInt(f.From, 10, 64)
		if err != nil {
			return req, errField("from offset", f.From)
		}
		req.FromOffset = o
	}
	if f.To != "" {
		o, err := strconv.ParseInt(f.To, 10, 64)
		if err != nil {
			return req, errField("to offset", f.To)
		}
		req.ToOffset = &o
	}
	return req, nil
}

type fieldError struct{ field, value string }

func (e fieldError) Error() string { return "bad " + e.field + ": " + strconv.Quote(e.value) }

func errField(field, value string) error { return fieldError{field, value} }
