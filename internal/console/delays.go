package console

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/sluice-mq/sluice/internal/delay"
)

type delaysData struct {
	Buckets   []string
	Topics    []delay.TopicStats
	Partial   string
	Cancelled string
}

func (c *Console) delays(w http.ResponseWriter, r *http.Request, s *session) {
	c.delaysPage(w, r, s, "", nil)
}

func (c *Console) delaysPage(w http.ResponseWriter, r *http.Request, s *session, cancelled string, err error) {
	var st struct {
		Buckets         []string           `json:"buckets"`
		Topics          []delay.TopicStats `json:"topics"`
		StorePartitions int                `json:"store_partitions"`
		Partitions      []int32            `json:"partitions"`
		Loading         bool               `json:"loading"`
	}
	code, cerr := c.call(r, s, "GET", "/v1/delay/stats", nil, &st)
	if err == nil && cerr != nil {
		err = cerr
	}
	d := delaysData{Buckets: st.Buckets, Topics: st.Topics, Cancelled: cancelled}
	if st.StorePartitions > 0 && len(st.Partitions) < st.StorePartitions {
		d.Partial = fmt.Sprintf("this broker leads %d of the %d store partitions: the counts are theirs (sluice delay stats --admin with every broker merges them)", len(st.Partitions), st.StorePartitions)
	}
	if err != nil && code == 0 {
		code = http.StatusBadRequest
	}
	if code < 400 {
		code = http.StatusOK
	}
	c.page(w, s, code, "delays", "Delayed records", d, err)
}

func (c *Console) cancelDelay(w http.ResponseWriter, r *http.Request, s *session) {
	q := url.Values{}
	for _, k := range []string{"topic", "partition", "offset", "message-id"} {
		if v := strings.TrimSpace(r.PostFormValue(k)); v != "" {
			q.Set(k, v)
		}
	}
	var res struct {
		Cancelled []delay.Cancelled `json:"cancelled"`
	}
	if _, err := c.call(r, s, "POST", "/v1/delay/cancel?"+q.Encode(), nil, &res); err != nil {
		c.delaysPage(w, r, s, "", fmt.Errorf("cancel: %w", err))
		return
	}
	var parts []string
	for _, x := range res.Cancelled {
		parts = append(parts, fmt.Sprintf("%s-%d offset %d", x.Topic, x.Partition, x.Offset))
	}
	msg := "nothing matched"
	if len(parts) > 0 {
		msg = "cancelled " + strings.Join(parts, ", ")
	}
	c.delaysPage(w, r, s, msg, nil)
}
