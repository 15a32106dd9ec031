package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	zmq "github.com/pebbe/zmq4"
	"github.com/urfave/cli/v2"
)

// maxSockets lifts libzmq's default cap of 1023 sockets per process: a
// controller keeps one connection per worker, and would otherwise stop
// near a thousand workers. (Go already raises the open-file limit.)
const maxSockets = 16384

// prog prefixes the errors on stderr: rlctl, or rlctl-cuda (the same
// command built with the cuda tag), so a message says which binary spoke.
var prog = filepath.Base(os.Args[0])

func main() {
	if err := raiseSocketLimit(); err != nil {
		fmt.Fprintln(os.Stderr, prog+":", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newApp().RunContext(ctx, os.Args); err != nil {
		var exit cli.ExitCoder
		if errors.As(err, &exit) {
			if msg := exit.Error(); msg != "" {
				fmt.Fprintln(os.Stderr, prog+":", msg)
			}
			os.Exit(exit.ExitCode())
		}
		fmt.Fprintln(os.Stderr, prog+":", err)
		os.Exit(1)
	}
}

// raiseSocketLimit must run before the first ZeroMQ socket is made.
func raiseSocketLimit() error {
	if err := zmq.SetMaxSockets(maxSockets); err != nil {
		return fmt.Errorf("raise the ZeroMQ socket limit to %d: %w", maxSockets, err)
	}
	return nil
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
			startCommand(), stopCommand(), statusCommand(), dashboardCommand(), sdCommand(), plotCommand(), experimentsCommand(),
			versionsCommand(), tagCommand(),
			workerCommand(), requestCommand(), lsCommand(), nameserverCommand(), keygenCommand(), devicesCommand(),
		},
		EnableBashCompletion: true,
		ExitErrHandler:       func(*cli.Context, error) {}, // main prints and exits
	}
}
