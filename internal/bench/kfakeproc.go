package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kfake"
)

// The child-process kfake (--target kfake-process, and the third run of
// --compare) is kfake served by a second copy of this binary, so that the
// baseline and the clients are separate processes, as a real broker and its
// clients are. In-process kfake shares the driver's runtime, scheduler and
// garbage collector with the clients and skips the cross-process wake-ups a
// real broker pays for on every request; on a small machine that alone moves
// the ratio by a tenth or more.

// KfakeCommand returns the command that serves kfake for the child-process
// target: it must print one listen address on a line of its stdout and serve
// until its stdin is closed. The default runs this binary's hidden `bench
// serve-kfake` command.
type KfakeCommand func(ctx context.Context, partitions int32) (*exec.Cmd, error)

func defaultKfakeCommand(ctx context.Context, partitions int32) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench: find this binary to run kfake in a child process: %w", err)
	}
	return exec.CommandContext(ctx, self, "bench", "serve-kfake", "--partitions", strconv.Itoa(int(partitions))), nil
}

// kfakeProcess is a running child-process kfake.
type kfakeProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addr  string
}

// startKfakeProcess starts the child and waits for its address.
func startKfakeProcess(ctx context.Context, mk KfakeCommand, partitions int32) (*kfakeProcess, error) {
	if mk == nil {
		mk = defaultKfakeCommand
	}
	cmd, err := mk(ctx, partitions)
	if err != nil {
		return nil, err
	}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: kfake child stdin: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("bench: kfake child stdout: %w", err)
	}
	if cmd.Stderr == nil {
		cmd.Stderr = os.Stderr
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start kfake child: %w", err)
	}
	k := &kfakeProcess{cmd: cmd, stdin: stdin}
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- strings.TrimSpace(sc.Text())
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case addr, ok := <-line:
		if !ok {
			k.stop()
			return nil, errors.New("bench: kfake child exited without printing its address")
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			k.stop()
			return nil, fmt.Errorf("bench: kfake child printed %q, not an address: %w", addr, err)
		}
		k.addr = addr
		return k, nil
	case <-time.After(30 * time.Second):
		k.stop()
		return nil, errors.New("bench: kfake child printed no address within 30s")
	case <-ctx.Done():
		k.stop()
		return nil, ctx.Err()
	}
}

// stop closes the child's stdin, which ends it, and kills it if it lingers.
func (k *kfakeProcess) stop() {
	k.stdin.Close()
	done := make(chan struct{})
	go func() {
		_ = k.cmd.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = k.cmd.Process.Kill()
		<-done
	}
}

// ServeKfake runs a one-broker kfake cluster, writes its address and a
// newline to out, and serves until in reaches EOF or ctx ends.
func ServeKfake(ctx context.Context, partitions int32, in io.Reader, out io.Writer) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.DefaultNumPartitions(int(partitions)))
	if err != nil {
		return fmt.Errorf("bench: start kfake: %w", err)
	}
	defer c.Close()
	if _, err := fmt.Fprintln(out, c.ListenAddrs()[0]); err != nil {
		return err
	}
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, in)
		close(eof)
	}()
	select {
	case <-eof:
	case <-ctx.Done():
	}
	return nil
}

// serveKfakeCommand is the hidden `sluice bench serve-kfake`.
func serveKfakeCommand() *cobra.Command {
	var partitions int32 = 1
	cmd := &cobra.Command{
		Use:    "serve-kfake",
		Short:  "Serve an in-memory kfake broker until stdin closes (the child of --target kfake-process)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return ServeKfake(cmd.Context(), partitions, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
	cmd.Flags().Int32Var(&partitions, "partitions", partitions, "default partitions of auto-created topics")
	return cmd
}
