// Command etcdproc runs the test etcd (etcdtest.EmbedConfig) as a process
// of its own, so failure tests can pause it with SIGSTOP as a long GC or a
// VM stall would, which an etcd embedded in the test process cannot be.
// It prints "ready" on stdout once it serves and stops on SIGTERM.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"syscall"

	"go.etcd.io/etcd/server/v3/embed"

	"github.com/sluice-mq/sluice/internal/meta/etcd/etcdtest"
)

func main() {
	dir := flag.String("dir", "", "data directory")
	client := flag.String("client", "", "client URL")
	peer := flag.String("peer", "", "peer URL")
	flag.Parse()
	cu, err := url.Parse(*client)
	if err == nil {
		var pu *url.URL
		if pu, err = url.Parse(*peer); err == nil {
			err = run(*dir, *cu, *pu)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdproc:", err)
		os.Exit(1)
	}
}

func run(dir string, client, peer url.URL) error {
	e, err := embed.StartEtcd(etcdtest.EmbedConfig(dir, client, peer))
	if err != nil {
		return err
	}
	defer e.Close()
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	select {
	case <-e.Server.ReadyNotify():
		fmt.Println("ready")
	case err := <-e.Err():
		return err
	case <-sig:
		return nil
	}
	select {
	case err := <-e.Err():
		return err
	case <-sig:
		return nil
	}
}
