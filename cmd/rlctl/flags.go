package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/urfave/cli/v2"
)

const (
	flagNameResolve = "nameresolve"
	flagExperiment  = "experiment"
	flagTrial       = "trial"
	flagLogLevel    = "log-level"
)

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name: flagNameResolve, Aliases: []string{"n"}, EnvVars: []string{"RLCTL_NAMERESOLVE"},
			Value: "127.0.0.1:2379", Usage: "etcd endpoints, comma separated",
		},
		&cli.StringFlag{
			Name: flagExperiment, Aliases: []string{"e"}, EnvVars: []string{"RLCTL_EXPERIMENT"},
			Usage: "experiment name",
		},
		&cli.StringFlag{
			Name: flagTrial, Aliases: []string{"t"}, EnvVars: []string{"RLCTL_TRIAL"},
			Usage: "trial name",
		},
		&cli.StringFlag{
			Name: flagLogLevel, EnvVars: []string{"RLCTL_LOG_LEVEL"}, Value: "info",
			Usage: "debug, info, warn or error",
		},
	}
}

// logger writes text logs to stderr at the level of --log-level.
func logger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String(flagLogLevel))); err != nil {
		return nil, cli.Exit(fmt.Sprintf("--log-level %q: want debug, info, warn or error", c.String(flagLogLevel)), 2)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}

// trialFlags returns the trial named by --experiment and --trial.
func trialFlags(c *cli.Context) (names.Trial, error) {
	exp, trial := c.String(flagExperiment), c.String(flagTrial)
	if exp == "" || trial == "" {
		return names.Trial{}, cli.Exit("no trial given: set --experiment and --trial (or RLCTL_EXPERIMENT and RLCTL_TRIAL)", 2)
	}
	return names.NewTrial(exp, trial), nil
}

// openRepo connects to the etcd of --nameresolve; an unreachable etcd is one clear line.
func openRepo(ctx context.Context, c *cli.Context, log *slog.Logger) (*etcd.Repository, error) {
	var endpoints []string
	for _, e := range strings.Split(c.String(flagNameResolve), ",") {
		if e = strings.TrimSpace(e); e != "" {
			endpoints = append(endpoints, e)
		}
	}
	repo, err := etcd.Open(ctx, etcd.Config{Endpoints: endpoints, DialTimeout: 3 * time.Second, Logger: log})
	if err != nil {
		return nil, cli.Exit(err.Error()+" (start one with `rlctl nameserver`, or point --nameresolve / RLCTL_NAMERESOLVE at yours)", 1)
	}
	return repo, nil
}
