package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/sluice-mq/sluice/internal/bench"
	"github.com/sluice-mq/sluice/internal/testbroker"
)

// benchProcess runs cfg with `sluice bench --json` in a process of its own,
// so the load driver does not share a Go runtime (and its garbage
// collector) with the etcd embedded in the test process. Ending ctx sends
// the driver SIGINT: it stops and reports what it did so far. An error
// that bench reports as an incomplete run wraps bench.ErrIncomplete.
func benchProcess(ctx context.Context, bin string, cfg bench.Config) (*bench.Result, error) {
	args := []string{"bench", "--json",
		"--brokers", strings.Join(cfg.Brokers, ","),
		"--topic", cfg.Topic,
		"--records", strconv.FormatInt(cfg.Records, 10),
		"--size", strconv.Itoa(cfg.Size),
		"--partitions", strconv.Itoa(int(cfg.Partitions)),
		"--producers", strconv.Itoa(cfg.Producers),
		"--acks", cfg.Acks,
		"--idempotent=" + strconv.FormatBool(cfg.Idempotent),
		"--compression", cfg.Compression,
		"--rate", strconv.FormatFloat(cfg.RateMBps, 'f', -1, 64),
		"--timeout", cfg.Timeout.String(),
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var res bench.Result
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("bench %s: %v; no JSON report (%v): %s", strings.Join(args, " "), runErr, err, stderr.String())
	}
	if runErr != nil {
		msg := strings.TrimSpace(stderr.String())
		if strings.Contains(msg, bench.ErrIncomplete.Error()) {
			return &res, fmt.Errorf("%w: %s", bench.ErrIncomplete, msg)
		}
		return &res, fmt.Errorf("bench: %v: %s", runErr, msg)
	}
	return &res, nil
}

// benchBinary is the sluice binary the figures run bench with.
var benchBinary = testbroker.BuildBinary
