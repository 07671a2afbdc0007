package console

import (
	"net/http"
	"net/url"
	"strconv"

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
}

func (c *Console) deadLetter(w http.ResponseWriter, r *http.Request, s *session) {
	name := r.PathValue("topic")
	d := deadLetterData{Topic: name}
	p, _ := strconv.ParseInt(r.URL.Query().Get("partition"), 10, 32)
	d.Partition = int32(p)
	q := url.Values{"partition": {strconv.Itoa(int(d.Partition))}}
	if o := r.URL.Query().Get("offset"); o != "" {
		q.Set("offset", o)
	}
	var res trace.Result
	code, err := c.call(r, s, "GET", "/v1/dlq/"+url.PathEscape(name)+"?"+q.Encode(), nil, &res)
	d.Records = res.Records
	if code < 400 {
		code = http.StatusOK
	}
	c.page(w, s, code, "deadletter", name, d, err)
}
