package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newApp().RunContext(ctx, os.Args); err != nil {
		var exit cli.ExitCoder
		if errors.As(err, &exit) {
			if msg := exit.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, "rlctl:", msg)
			}
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, "rlctl:", err)
		os.Exit(1)
	}
}

func newApp() *cli.App {
	return &cli.App{
		Name:  "rlctl",
		Usage: "run and talk to distrl workers",
		Description: "distrl is a distributed reinforcement-learning runtime. Every worker is a process " +
			"with a ZeroMQ server registered in etcd; rlctl starts workers and name servers and " +
			"talks to live workers.",
		Flags: globalFlags(),
		Commands: []*cli.Command{
			startCommand(), stopCommand(), statusCommand(), plotCommand(), experimentsCommand(),
			workerCommand(), requestCommand(), lsCommand(), nameserverCommand(), keygenCommand(),
		},
		EnableBashCompletion: true,
		ExitErrHandler:       func(*cli.Context, error) {}, // main prints and exits
	}
}
