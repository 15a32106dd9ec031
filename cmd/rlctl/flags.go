package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/urfave/cli/v2"
)

const (
	flagNameResolve = "nameresolve"
	flagExperiment  = "experiment"
	flagTrial       = "trial"
	flagLogLevel    = "log-level"
	flagCurveKeys   = "curve-keys"
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
			Name: flagCurveKeys, EnvVars: []string{"RLCTL_CURVE_KEYS"},
			Usage: "the experiment's CurveZMQ key file (rlctl keygen): workers answer only clients holding it",
		},
		&cli.StringFlag{
			Name: flagLogLevel, EnvVars: []string{"RLCTL_LOG_LEVEL"}, Value: "info",
			Usage: "debug, info, warn or error",
		},
	}
}

// withGlobal adds the global flags to a command's own, so they can be given
// after the command name too (`rlctl ls --trial t1`).
func withGlobal(own ...cli.Flag) []cli.Flag { return append(own, globalFlags()...) }

// global reads a global flag from wherever it was given: after the command
// name, before it, or in the environment; else its default. (urfave/cli
// would read the innermost definition, even when only an outer one is set.)
func global(c *cli.Context, name string) string {
	for _, ctx := range c.Lineage() {
		if ctx.Command != nil && slices.Contains(ctx.LocalFlagNames(), name) {
			return ctx.String(name)
		}
	}
	return c.String(name)
}

// logger writes text logs to stderr at the level of --log-level.
func logger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(global(c, flagLogLevel))); err != nil {
		return nil, cli.Exit(fmt.Sprintf("--log-level %q: want debug, info, warn or error", global(c, flagLogLevel)), 2)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})), nil
}

// trialFlags returns the trial named by --experiment and --trial.
func trialFlags(c *cli.Context) (names.Trial, error) {
	exp, trial := global(c, flagExperiment), global(c, flagTrial)
	if exp == "" || trial == "" {
		return names.Trial{}, cli.Exit("no trial given: set --experiment and --trial (or RLCTL_EXPERIMENT and RLCTL_TRIAL)", 2)
	}
	return names.NewTrial(exp, trial), nil
}

// openRepo connects to the etcd of --nameresolve; an unreachable etcd is one clear line.
func openRepo(ctx context.Context, c *cli.Context, log *slog.Logger) (*etcd.Repository, error) {
	var endpoints []string
	for _, e := range strings.Split(global(c, flagNameResolve), ",") {
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

// curveKeys loads the key pair of --curve-keys; nil when none is given.
func curveKeys(c *cli.Context) (*rpc.CurveKeyPair, error) {
	path := global(c, flagCurveKeys)
	if path == "" {
		return nil, nil
	}
	kp, err := rpc.ReadCurveKeyFile(path)
	if err != nil {
		return nil, cli.Exit(err.Error(), 2)
	}
	return &kp, nil
}

// session is what every command that works on a live trial needs: its
// logger, its key space, a connection to its name server and its keys.
type session struct {
	log   *slog.Logger
	trial names.Trial
	repo  *etcd.Repository
	curve *rpc.CurveKeyPair
}

// openSession reads the global flags and connects to the name server.
func openSession(c *cli.Context) (*session, error) {
	log, err := logger(c)
	if err != nil {
		return nil, err
	}
	trial, err := trialFlags(c)
	if err != nil {
		return nil, err
	}
	curve, err := curveKeys(c)
	if err != nil {
		return nil, err
	}
	repo, err := openRepo(c.Context, c, log)
	if err != nil {
		return nil, err
	}
	return &session{log: log, trial: trial, repo: repo, curve: curve}, nil
}

// panel returns a control panel for the session's trial; close it before the session.
func (s *session) panel() *worker.ControlPanel {
	var opts worker.PanelOptions
	if s.curve != nil {
		opts.Curve = s.curve.ClientKeys()
	}
	return worker.NewControlPanel(s.repo, s.trial, opts)
}

func (s *session) Close() error { return s.repo.Close() }
