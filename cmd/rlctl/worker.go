package main

import (
	"errors"
	"fmt"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/echoworker"
	"github.com/distrl/distrl/policyworker"
	"github.com/distrl/distrl/sinkworker"
	"github.com/distrl/distrl/trainerworker"
	"github.com/distrl/distrl/worker"
	"github.com/urfave/cli/v2"
)

// builtinTypes is the registry of every built-in worker type.
func builtinTypes() (*worker.Registry, error) {
	reg := worker.NewRegistry()
	for name, f := range map[string]worker.Factory{
		echoworker.TypeName:    echoworker.New,
		sinkworker.TypeName:    sinkworker.New,
		policyworker.TypeName:  policyworker.New,
		actorworker.TypeName:   actorworker.New,
		trainerworker.TypeName: trainerworker.New,
	} {
		if err := reg.Register(name, f); err != nil {
			return nil, err
		}
	}
	return reg, nil
}

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run one worker in the foreground until told to exit (SIGINT/SIGTERM exit gracefully)",
		Flags: withGlobal(
			&cli.StringFlag{Name: "type", Required: true, Usage: "worker type"},
			&cli.IntFlag{Name: "index", Value: 0, Usage: "worker index: the worker is named TYPE/INDEX"},
			&cli.StringFlag{Name: "host", EnvVars: []string{"RLCTL_HOST"}, Usage: "address to bind and advertise (default: this machine's address on the interface that routes to the name server)"},
			&cli.IntFlag{Name: "port", Value: 0, Usage: "port to bind (0: any free port)"},
			&cli.DurationFlag{Name: "ttl", Value: worker.DefaultAddressTTL, Usage: "lease of the address record: how long it outlives a killed worker"},
			&cli.DurationFlag{Name: "status-ttl", Value: worker.DefaultStatusTTL, Usage: "lease of the status record"},
		),
		Action: runWorker,
	}
}

func runWorker(c *cli.Context) error {
	if c.Int("index") < 0 {
		return cli.Exit(fmt.Sprintf("--index %d: must be >= 0", c.Int("index")), 2)
	}
	types, err := builtinTypes()
	if err != nil {
		return err
	}
	sess, err := openSession(c)
	if err != nil {
		return err
	}
	defer sess.Close()
	w, err := worker.New(c.Context, worker.Options{
		Trial: sess.trial, Registry: types, Type: c.String("type"), Index: c.Int("index"),
		Host: workerHost(c, sess), Port: c.Int("port"), Repo: sess.repo,
		AddressTTL: c.Duration("ttl"), StatusTTL: c.Duration("status-ttl"),
		Curve: sess.curve, Logger: sess.log,
	})
	if err != nil {
		return cli.Exit(err.Error(), 1)
	}
	if err := w.Run(c.Context); err != nil {
		if errors.Is(err, worker.ErrFailed) {
			return cli.Exit(err.Error(), 3)
		}
		return err
	}
	return nil
}

// workerHost is --host, else the address of the interface that routes to
// the name server: on a cluster node, the one the other nodes reach.
func workerHost(c *cli.Context, sess *session) string {
	if h := c.String("host"); h != "" {
		return h
	}
	eps := endpoints(global(c, flagNameResolve))
	if len(eps) > 0 {
		h, err := worker.RouteHost(eps[0])
		if err == nil {
			return h
		}
		sess.log.Warn("advertising the first address of this machine", "err", err)
	}
	return worker.RoutableHost()
}
