// Command sluice is the one sluice binary: `sluice serve` runs a broker, the
// other subcommands are tools that talk to any Kafka-compatible broker.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/sluice-mq/sluice/internal/bench"
	"github.com/sluice-mq/sluice/internal/cli"
)

func main() {
	root := &cobra.Command{
		Use:           "sluice",
		Short:         "sluice: a Kafka-compatible message queue with storage separated from compute",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCommand())
	root.AddCommand(cli.Commands()...)
	root.AddCommand(bench.Command())
	// Ctrl-C or SIGTERM cancels the command's context: serve shuts down
	// gracefully, consume --follow exits cleanly.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "sluice:", err)
		os.Exit(1)
	}
}
