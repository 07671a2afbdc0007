package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
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
// that bench reports as an incomplete run wraps bench.ErrIncomplete. With
// watch, bench logs its progress and watch gets each line of it as it
// comes (from another goroutine, done before benchProcess returns).
func benchProcess(ctx context.Context, bin string, cfg bench.Config, watch func(line string)) (*bench.Result, error) {
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
	if cfg.Linger > 0 {
		args = append(args, "--linger", cfg.Linger.String())
	}
	if watch != nil {
		args = append(args, "--verbose")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = time.Minute
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if watch != nil {
		cmd.Stderr = io.MultiWriter(&stderr, &lineWriter{fn: watch})
	}
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

// lineWriter calls fn with each complete line written to it.
type lineWriter struct {
	fn  func(string)
	buf []byte
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(p), nil
		}
		w.fn(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}

// benchBinary is the sluice binary the figures run bench with.
var benchBinary = testbroker.BuildBinary
