package registry

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestSubjectTopic(t *testing.T) {
	for in, want := range map[string]string{
		"orders-value": "orders", "orders-key": "orders", "com.acme.User": "com.acme.User",
		"-value": "-value", "a-key-value": "a-key", "orders-values": "orders-values",
	} {
		if got := SubjectTopic(in); got != want {
			t.Errorf("SubjectTopic(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRequiredAccess: the ACL each route needs by path and method.
func TestRequiredAccess(t *testing.T) {
	const (
		describe = kmsg.ACLOperationDescribe
		write    = kmsg.ACLOperationWrite
		alter    = kmsg.ACLOperationAlter
		alterCfg = kmsg.ACLOperationAlterConfigs
		topic    = kmsg.ACLResourceTypeTopic
		cluster  = kmsg.ACLResourceTypeCluster
	)
	for _, tt := range []struct {
		method, path string
		op           kmsg.ACLOperation
		rt           kmsg.ACLResourceType
		name         string // "" when nothing is required here
	}{
		{"GET", "/", 0, 0, ""},
		{"GET", "/schemas/types", 0, 0, ""},
		{"GET", "/schemas", 0, 0, ""},
		{"GET", "/schemas/ids/3", 0, 0, ""},
		{"GET", "/subjects", 0, 0, ""},
		{"GET", "/subjects/orders-value/versions", describe, topic, "orders"},
		{"HEAD", "/subjects/orders-value/versions/1", describe, topic, "orders"},
		{"GET", "/subjects/orders-key/versions/latest/referencedby", describe, topic, "orders"},
		{"POST", "/subjects/orders-value", describe, topic, "orders"},
		{"POST", "/subjects/orders-value/versions", write, topic, "orders"},
		{"DELETE", "/subjects/orders-value", alter, topic, "orders"},
		{"DELETE", "/subjects/orders-value/versions/2", alter, topic, "orders"},
		{"POST", "/compatibility/subjects/orders-value/versions/latest", describe, topic, "orders"},
		{"GET", "/config/orders-value", describe, topic, "orders"},
		{"PUT", "/config/orders-value", alter, topic, "orders"},
		{"DELETE", "/mode/orders-value", alter, topic, "orders"},
		{"GET", "/config", 0, 0, ""},
		{"PUT", "/config", alterCfg, cluster, "kafka-cluster"},
		{"DELETE", "/config", alterCfg, cluster, "kafka-cluster"},
		{"PUT", "/mode", alterCfg, cluster, "kafka-cluster"},
		{"GET", "/subjects/a%2Fb-value/versions", describe, topic, "a/b"},
	} {
		op, rt, name, ok := requiredAccess(httptest.NewRequest(tt.method, tt.path, nil))
		if ok != (tt.name != "") || (ok && (op != tt.op || rt != tt.rt || name != tt.name)) {
			t.Errorf("%s %s: %v %v %q %v; want %v %v %q", tt.method, tt.path, op, rt, name, ok, tt.op, tt.rt, tt.name)
		}
	}
}

// FuzzRequiredAccess: any method and request target is classified without
// panicking, and every request naming a subject needs an ACL on its topic.
func FuzzRequiredAccess(f *testing.F) {
	for _, seed := range [][2]string{
		{"GET", "/subjects/orders-value/versions/1"}, {"POST", "/subjects/a%2Fb-key/versions"},
		{"DELETE", "/subjects/x"}, {"PUT", "/config"}, {"PUT", "/mode/s"}, {"GET", "/schemas/ids/1"},
		{"POST", "/compatibility/subjects/s/versions/latest"}, {"GET", "//subjects//"}, {"GET", "/subjects/%zz"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, method, target string) {
		if !strings.HasPrefix(target, "/") {
			target = "/" + target
		}
		u, err := url.ParseRequestURI(target)
		if err != nil {
			return
		}
		req := &http.Request{Method: method, URL: u}
		op, rt, name, ok := requiredAccess(req)
		parts := strings.Split(strings.Trim(u.EscapedPath(), "/"), "/")
		if len(parts) >= 2 && parts[0] == "subjects" && (!ok || rt != kmsg.ACLResourceTypeTopic || op == 0) {
			t.Fatalf("%s %s needs nothing (%v %v %q %v)", method, target, op, rt, name, ok)
		}
	})
}
