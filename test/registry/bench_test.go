package registry

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// benchRegistry is one in-process node and a keep-alive HTTP client.
func benchRegistry(b *testing.B) (*testbroker.Broker, *http.Client) {
	br := testbroker.Start(b)
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	b.Cleanup(tr.CloseIdleConnections)
	return br, &http.Client{Transport: tr, Timeout: time.Minute}
}

func post(b *testing.B, cl *http.Client, url string, body []byte) []byte {
	resp, err := cl.Post(url, "application/vnd.schemaregistry.v1+json", bytes.NewReader(body))
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		b.Fatalf("POST %s: %d %s", url, resp.StatusCode, out)
	}
	return out
}

func reportLatencies(b *testing.B, lat []time.Duration) {
	slices.Sort(lat)
	q := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) }
	b.ReportMetric(q(0.5), "p50-µs")
	b.ReportMetric(q(0.99), "p99-µs")
}

// evolved is version v of subject k's record: a field with a default
// added per version, so each is BACKWARD compatible with the one before.
func evolved(k, v int) string {
	var fields bytes.Buffer
	for j := range v {
		fmt.Fprintf(&fields, `,{"name":"g%d","type":"int","default":0}`, j)
	}
	return fmt.Sprintf(`{"type":"record","name":"E%d","fields":[{"name":"f","type":"int"}%s]}`, k, fields.String())
}

// BenchmarkRegister registers a new Avro schema per iteration, one at a
// time, on one node with the default flush policy (an fsync per write):
// each answer waits for the record to be durable and applied. The schemas
// are new versions of 1,000 subjects, each checked (BACKWARD) against the
// subject's latest.
func BenchmarkRegister(b *testing.B) {
	br, cl := benchRegistry(b)
	url := "http://" + br.RegistryAddr() + "/subjects/bench-%d/versions"
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		body, _ := json.Marshal(map[string]string{"schema": evolved(i%1000, i/1000)})
		t0 := time.Now()
		post(b, cl, fmt.Sprintf(url, i%1000), body)
		lat = append(lat, time.Since(t0))
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "registrations/s")
	reportLatencies(b, lat)
}

// BenchmarkLookupByID fetches schemas by id over HTTP from 8 concurrent
// clients: GET /schemas/ids/{id}, answered from memory.
func BenchmarkLookupByID(b *testing.B) {
	br, cl := benchRegistry(b)
	const schemas = 1000
	base := "http://" + br.RegistryAddr()
	for i := range schemas {
		body, _ := json.Marshal(map[string]string{"schema": recordSchema(i)})
		post(b, cl, base+"/subjects/lookup-"+strconv.Itoa(i)+"/versions", body)
	}
	var n atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(8)
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			id := n.Add(1)%schemas + 1
			resp, err := cl.Get(base + "/schemas/ids/" + strconv.FormatInt(id, 10))
			if err != nil {
				b.Error(err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Errorf("id %d: %d", id, resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
}

// BenchmarkSchemaByID is the produce path's in-process lookup
// (Registry.SchemaByID), lock-free, from every core.
func BenchmarkSchemaByID(b *testing.B) {
	br, cl := benchRegistry(b)
	const schemas = 1000
	base := "http://" + br.RegistryAddr()
	for i := range schemas {
		body, _ := json.Marshal(map[string]string{"schema": recordSchema(i)})
		post(b, cl, base+"/subjects/byid-"+strconv.Itoa(i)+"/versions", body)
	}
	reg := br.Server().SchemaRegistry()
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			if _, ok := reg.SchemaByID(i%schemas + 1); !ok {
				b.Errorf("id %d missing", i%schemas+1)
				return
			}
			if !reg.RegisteredUnder("byid-"+strconv.Itoa(i%schemas), i%schemas+1) {
				b.Errorf("id %d not under its subject", i%schemas+1)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "lookups/s")
}
