package kafka

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluice-mq/sluice/internal/topicconfig"
)

// IncrementalAlterConfigs v0-v1 (v1 flexible): set, delete, append and
// subtract (the last two for list-typed configs), per KIP-339.
func init() { register(kmsg.IncrementalAlterConfigs, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(rc *reqCtx, kreq kmsg.Request) func() kmsg.Response {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	b := rc.broker()
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType = rr.ResourceType
		sr.ResourceName = rr.ResourceName
		resp.Resources = append(resp.Resources, sr)
		out := &resp.Resources[len(resp.Resources)-1]
		if code := rc.configAuth(int8(rr.ResourceType), rr.ResourceName, kmsg.ACLOperationAlterConfigs); code != 0 {
			out.ErrorCode = code
			continue
		}
		// cur is the resource's current override set; lookup finds a key's
		// definition (for broker keys, the topic config it defaults).
		var cur map[string]string
		var lookup func(string) (topicconfig.Def, bool)
		switch int8(rr.ResourceType) {
		case resourceTopic:
			info, ok := b.Engine().Topic(rr.ResourceName)
			if !ok {
				code, err := alterTopicConfigs(rc, b, resourceTopic, rr.ResourceName, nil, true)
				out.ErrorCode, out.ErrorMessage = code, errorMessage(err)
				continue
			}
			cur, lookup = info.Configs, topicconfig.Lookup
		case resourceBroker:
			dyn, err := b.DynamicConfigs(rr.ResourceName)
			if err != nil {
				out.ErrorCode, out.ErrorMessage = errorCode(err), errorMessage(err)
				continue
			}
			cur, lookup = dyn, brokerKeyDef
		default:
			code, err := alterTopicConfigs(rc, b, int8(rr.ResourceType), rr.ResourceName, nil, true)
			out.ErrorCode, out.ErrorMessage = code, errorMessage(err)
			continue
		}
		next := map[string]string{}
		for k, v := range cur {
			next[k] = v
		}
		var err error
		seen := map[string]bool{}
		for _, c := range rr.Configs {
			if seen[c.Name] {
				err = fmt.Errorf("config %q appears more than once", c.Name)
				out.ErrorCode = kerr.InvalidRequest.Code
				break
			}
			seen[c.Name] = true
			d, known := lookup(c.Name)
			if !known {
				err = fmt.Errorf("%w: unknown or read-only config %q", topicconfig.ErrInvalid, c.Name)
				break
			}
			val := ""
			if c.Value != nil {
				val = *c.Value
			}
			switch c.Op {
			case kmsg.IncrementalAlterConfigOpSet:
				if c.Value == nil {
					err = fmt.Errorf("%w: null value for %q", topicconfig.ErrInvalid, c.Name)
				}
				next[c.Name] = val
			case kmsg.IncrementalAlterConfigOpDelete:
				delete(next, c.Name)
			case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
				if d.Type != topicconfig.TypeList {
					err = fmt.Errorf("%w: %q is not a list; APPEND and SUBTRACT apply to lists only", topicconfig.ErrInvalid, c.Name)
					break
				}
				list, ok := next[c.Name]
				if !ok {
					list = topicconfig.Effective(b.TopicDefaults(), nil)[d.Name]
				}
				next[c.Name] = editList(list, val, c.Op == kmsg.IncrementalAlterConfigOpAppend)
			default:
				err = fmt.Errorf("unknown operation %d for %q", c.Op, c.Name)
				out.ErrorCode = kerr.InvalidRequest.Code
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			if out.ErrorCode == 0 {
				out.ErrorCode = errorCode(err)
			}
			out.ErrorMessage = errorMessage(err)
			continue
		}
		code, err := alterTopicConfigs(rc, b, int8(rr.ResourceType), rr.ResourceName, next, req.ValidateOnly)
		out.ErrorCode, out.ErrorMessage = code, errorMessage(err)
	}
	return done(resp)
}

func editList(cur, vals string, add bool) string {
	var items []string
	for _, s := range strings.Split(cur, ",") {
		if s = strings.TrimSpace(s); s != "" {
			items = append(items, s)
		}
	}
	for _, v := range strings.Split(vals, ",") {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		idx := -1
		for i, s := range items {
			if s == v {
				idx = i
			}
		}
		switch {
		case add && idx < 0:
			items = append(items, v)
		case !add && idx >= 0:
			items = append(items[:idx], items[idx+1:]...)
		}
	}
	return strings.Join(items, ",")
}
