package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker/panel"
	"github.com/urfave/cli/v2"
)

const (
	flagNameResolve = "nameresolve"
	flagExperiment  = "experiment"
	flagTrial       = "trial"
	flagLogLevel    = "log-level"
	flagCurveKeys   = "curve-keys"

	// The name server's TLS and authentication: etcdctl's flag names
	// after "nameresolve-".
	flagNRCACert     = "nameresolve-cacert"
	flagNRCert       = "nameresolve-cert"
	flagNRKey        = "nameresolve-key"
	flagNRSkipVerify = "nameresolve-insecure-skip-tls-verify"
	flagNRUser       = "nameresolve-user"
	flagNRPassword   = "nameresolve-password"
)

func globalFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{
			Name: flagNameResolve, Aliases: []string{"n"}, EnvVars: []string{"RLCTL_NAMERESOLVE"},
			Value: "127.0.0.1:2379", Usage: "etcd endpoints, comma separated",
		},
		&cli.StringFlag{
			Name: flagNRCACert, EnvVars: []string{"RLCTL_NAMERESOLVE_CACERT"},
			Usage: "CA bundle (PEM) that verifies the etcd servers' certificates; with it, endpoints without a scheme use TLS",
		},
		&cli.StringFlag{
			Name: flagNRCert, EnvVars: []string{"RLCTL_NAMERESOLVE_CERT"},
			Usage: "client certificate (PEM) for an etcd with --client-cert-auth",
		},
		&cli.StringFlag{
			Name: flagNRKey, EnvVars: []string{"RLCTL_NAMERESOLVE_KEY"},
			Usage: "the client certificate's private key (PEM)",
		},
		&cli.BoolFlag{
			Name: flagNRSkipVerify, EnvVars: []string{"RLCTL_NAMERESOLVE_INSECURE_SKIP_TLS_VERIFY"},
			Usage: "accept any etcd server certificate (testing only)",
		},
		&cli.StringFlag{
			Name: flagNRUser, EnvVars: []string{"RLCTL_NAMERESOLVE_USER"},
			Usage: "etcd user, NAME or NAME:PASSWORD; its role needs read/write on the distrl/ prefix",
		},
		&cli.StringFlag{
			Name: flagNRPassword, EnvVars: []string{controller.EnvNameResolvePassword},
			Usage: "the etcd user's password (prefer the environment variable: a command line is visible to every user in ps)",
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

// nameResolveSecurity reads the name server's TLS and authentication
// flags and checks them (files readable, a user with a password); a
// setting that cannot be used is one line naming the flag, exit code 2.
// File names are made absolute: the processes rlctl starts may run elsewhere.
func nameResolveSecurity(c *cli.Context) (etcd.Security, error) {
	sec := etcd.Security{
		User: global(c, flagNRUser), Password: global(c, flagNRPassword),
		InsecureSkipTLSVerify: global(c, flagNRSkipVerify) == "true",
	}
	for _, f := range []struct {
		flag string
		dst  *string
	}{{flagNRCACert, &sec.CACert}, {flagNRCert, &sec.Cert}, {flagNRKey, &sec.Key}} {
		if p := global(c, f.flag); p != "" {
			abs, err := filepath.Abs(p)
			if err != nil {
				return sec, cli.Exit(fmt.Sprintf("--%s %s: %v", f.flag, p, err), exitUsage)
			}
			*f.dst = abs
		}
	}
	if err := sec.Validate(); err != nil {
		return sec, nameResolveExit(err)
	}
	return sec, nil
}

// nameResolveExit turns an etcd.Open error into rlctl's exit: settings
// that cannot be used (exit 2) name their flag; a refused handshake or
// credentials are a configuration error too (exit 2); an unreachable
// etcd says how to start one (exit 1).
func nameResolveExit(err error) error {
	var se *etcd.SecurityError
	switch {
	case errors.As(err, &se) && se.File != "":
		return cli.Exit(fmt.Sprintf("--nameresolve-%s %s: %v", se.Option, se.File, se.Err), exitUsage)
	case errors.As(err, &se):
		return cli.Exit(fmt.Sprintf("--nameresolve-%s: %v", se.Option, se.Err), exitUsage)
	case errors.Is(err, etcd.ErrTLS), errors.Is(err, etcd.ErrAuth):
		return cli.Exit(err.Error()+" (see --nameresolve-cacert, --nameresolve-cert/-key, --nameresolve-user)", exitUsage)
	}
	return cli.Exit(err.Error()+" (start one with `rlctl nameserver`, or point --nameresolve / RLCTL_NAMERESOLVE at yours)", exitFailed)
}

// etcdConfig is the etcd client configuration of the flags for endpoints
// (a comma-separated list). An embedded etcd (a controller's own) is
// plaintext: no TLS or authentication settings apply to it.
func etcdConfig(c *cli.Context, endpointList string, embedded bool) (etcd.Config, error) {
	cfg := etcd.Config{Endpoints: endpoints(endpointList), DialTimeout: 3 * time.Second}
	if embedded {
		return cfg, nil
	}
	sec, err := nameResolveSecurity(c)
	cfg.Security = sec
	return cfg, err
}

// openRepo connects to the etcd of --nameresolve; an unreachable etcd is one clear line.
func openRepo(ctx context.Context, c *cli.Context, log *slog.Logger) (*etcd.Repository, error) {
	cfg, err := etcdConfig(c, global(c, flagNameResolve), false)
	if err != nil {
		return nil, err
	}
	cfg.Logger = log
	repo, err := openPatiently(ctx, cfg, waitFlag(c), log)
	if err != nil {
		return nil, nameResolveExit(err)
	}
	return repo, nil
}

// flagNameResolveWait is `rlctl worker`'s: how long to keep trying a name
// server that does not answer.
const flagNameResolveWait = "nameresolve-wait"

// waitFlag is --nameresolve-wait where the command has it, else 0.
func waitFlag(c *cli.Context) time.Duration {
	if slices.Contains(c.LocalFlagNames(), flagNameResolveWait) {
		return c.Duration(flagNameResolveWait)
	}
	return 0
}

// openPatiently opens the name server, trying again for up to wait while
// it does not answer (a refusal of its TLS or credentials is final at
// once): hundreds of workers that `rlctl start` launches together can keep
// the embedded etcd of a small machine busy for longer than one Open's
// dial timeout.
func openPatiently(ctx context.Context, cfg etcd.Config, wait time.Duration, log *slog.Logger) (*etcd.Repository, error) {
	var repo *etcd.Repository
	err := nameresolve.RetryUnavailable(ctx, wait, func() (err error) {
		repo, err = etcd.Open(ctx, cfg)
		return err
	}, func(err error, in time.Duration) {
		log.Warn("name server not answering; trying again", "in", in, "err", err)
	})
	return repo, err
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
func (s *session) panel() *panel.ControlPanel { return s.panelWith(panel.Options{}) }

// panelWith is panel with options of the caller's (the session sets Curve).
func (s *session) panelWith(opts panel.Options) *panel.ControlPanel {
	if s.curve != nil {
		opts.Curve = s.curve.ClientKeys()
	}
	return panel.New(s.repo, s.trial, opts)
}

func (s *session) Close() error { return s.repo.Close() }
