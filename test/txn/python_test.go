package txn

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sluice-mq/sluice/internal/testbroker"
)

// python is Debian's interpreter, where python3-confluent-kafka installs.
const python = "/usr/bin/python3"

// TestConfluentKafkaPython: librdkafka's transactional producer commits
// one transaction and aborts another; read_committed sees only the first.
func TestConfluentKafkaPython(t *testing.T) {
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s not installed", python)
	}
	if err := exec.Command(python, "-c", "import confluent_kafka").Run(); err != nil {
		t.Skipf("python3-confluent-kafka not installed: %v", err)
	}
	b := testbroker.Start(t)
	const topic = "txn-python"
	testbroker.CreateTopic(t, b.Addr(), topic, 2, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, python, "testdata/confluent_txn.py", b.Addr(), topic, "py-txn").CombinedOutput()
	if err != nil || !strings.HasSuffix(strings.TrimSpace(string(out)), "ok") {
		t.Fatalf("confluent_txn.py: %v\n%s", err, out)
	}
	committed := flatten(readUntilSentinel(t, b.Addr(), topic, 2, true))
	all := flatten(readUntilSentinel(t, b.Addr(), topic, 2, false))
	for i := range 10 {
		c, a := fmt.Sprintf("committed-%d", i), fmt.Sprintf("aborted-%d", i)
		if committed[c] != 1 || committed[a] != 0 {
			t.Errorf("read_committed: %s %d times, %s %d times; want 1 and 0", c, committed[c], a, committed[a])
		}
		if all[c] != 1 || all[a] != 1 {
			t.Errorf("read_uncommitted: %s %d times, %s %d times; want 1 and 1", c, all[c], a, all[a])
		}
	}
}
