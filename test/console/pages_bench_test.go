package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// BenchmarkConsolePages: the topics page with 10,000 topics and the groups
// page with 1,000 groups, served by a real broker over HTTP (the pages are
// drawn on the server, so this is what a browser waits for before it
// paints). Reported: ms per page.
//
//	go test -run XXX -bench BenchmarkConsolePages -benchtime 20x ./test/console/
func BenchmarkConsolePages(b *testing.B) {
	p := testbroker.StartProcess(b, testbroker.BuildBinary(b), "--log-level", "warn")
	cl := testbroker.NewClient(b, p.Addr())
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	const topics, groups = 10_000, 1_000
	for i := 0; i < topics; i += 500 {
		var names []string
		for j := i; j < i+500; j++ {
			names = append(names, fmt.Sprintf("topic-%05d", j))
		}
		if _, err := adm.CreateTopics(ctx, 1, 1, nil, names...); err != nil {
			b.Fatal(err)
		}
	}
	for g := range groups {
		var os kadm.Offsets
		os.AddOffset(fmt.Sprintf("topic-%05d", g), 0, 0, -1)
		if r, err := adm.CommitOffsets(ctx, fmt.Sprintf("group-%04d", g), os); err != nil || r.Error() != nil {
			b.Fatalf("commit: %v %v", err, r.Error())
		}
	}
	get := func(b *testing.B, path string) {
		resp, err := http.Get("http://" + p.AdminAddr() + path)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("%s: %s", path, resp.Status)
		}
	}
	for _, path := range []string{"/ui/topics", "/ui/topics?search=topic-09&offset=50", "/ui/groups", "/ui/"} {
		b.Run(path, func(b *testing.B) {
			for range b.N {
				get(b, path)
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/page")
		})
	}
}
