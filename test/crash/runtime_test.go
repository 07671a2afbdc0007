package crash

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// TestServeRuntimeSettings: the serve binary applies its Go runtime
// settings, as its own /metrics reports them: the default GC target of
// 400, and --gc-percent and --memory-limit-mb when given.
func TestServeRuntimeSettings(t *testing.T) {
	bin := testbroker.BuildBinary(t)
	for _, c := range []struct {
		args         []string
		gc, memlimit string
	}{
		{nil, "go_gc_gogc_percent 400", ""},
		{[]string{"--gc-percent", "150", "--memory-limit-mb", "512"}, "go_gc_gogc_percent 150", "go_gc_gomemlimit_bytes 5.36870912e+08"},
	} {
		admin := testbroker.FreeAddr(t)
		testbroker.StartProcess(t, bin, append([]string{"--admin-listen", admin}, c.args...)...)
		body := scrape(t, admin)
		for _, want := range []string{c.gc, c.memlimit} {
			if want != "" && !strings.Contains(body, "\n"+want+"\n") {
				t.Errorf("flags %v: /metrics has no line %q", c.args, want)
			}
		}
	}
}

func scrape(t *testing.T, addr string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://%s/metrics", addr), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
