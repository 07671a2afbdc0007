package registry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

func TestMain(m *testing.M) { os.Exit(testbroker.Main(m)) }

// Avro schemas of one record type, evolving: v2 adds a field with a
// default (BACKWARD compatible), bad adds one without (not).
const (
	userV1  = `{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"}]}`
	userV2  = `{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"email","type":"string","default":""}]}`
	userBad = `{"type":"record","name":"User","namespace":"t","fields":[{"name":"id","type":"long"},{"name":"age","type":"int"}]}`
)

func srClient(t testing.TB, addr string, opts ...sr.ClientOpt) *sr.Client {
	t.Helper()
	cl, err := sr.NewClient(append([]sr.ClientOpt{sr.URLs("http://" + addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// answer is one HTTP exchange with the registry.
type answer struct {
	status int
	ctype  string
	body   []byte
}

// code is the answer's Confluent error_code (0 when it has none).
func (a answer) code() int {
	var e struct {
		Code int `json:"error_code"`
	}
	json.Unmarshal(a.body, &e)
	return e.Code
}

func (a answer) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decoding %s: %v", a.body, err)
	}
}

func call(t testing.TB, method, url string, body any) answer {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/vnd.schemaregistry.v1+json")
	}
	cl := &http.Client{Timeout: time.Minute}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}
}

func schemaBody(s string) map[string]any { return map[string]any{"schema": s} }

func callType(t testing.TB, url, ctype, body string) answer {
	t.Helper()
	req, err := http.NewRequest("POST", url, bytes.NewReader([]byte(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", ctype)
	resp, err := (&http.Client{Timeout: time.Minute}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{status: resp.StatusCode, ctype: resp.Header.Get("Content-Type"), body: b}
}
