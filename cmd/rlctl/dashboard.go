package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/dashboard"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/panel"
	"github.com/urfave/cli/v2"
)

const (
	flagDashboard      = "dashboard"
	flagDashboardToken = "dashboard-token"
)

func dashboardCommand() *cli.Command {
	return &cli.Command{
		Name:      "dashboard",
		Usage:     "serve the live dashboard of a running trial: workers (HUNG and LOST included), curves, configuration, logs",
		ArgsUsage: "EXPERIMENT TRIAL",
		Description: "Serves the page, its JSON API, /sd (Prometheus http_sd_configs) and /metrics (the trial's figures) for a\n" +
			"trial already running, reached through the name server its controller's record names (else --nameresolve)\n" +
			"and its trial directory under --workdir. Prints `dashboard URL` once listening.\n" +
			"Bound to loopback by default; on any other address every request needs a token (--dashboard-token, else\n" +
			"a random one, in the printed URL) as `Authorization: Bearer TOKEN` or `?token=TOKEN`.",
		Flags: withGlobal(
			workdirFlag(),
			&cli.StringFlag{Name: "listen", Value: "127.0.0.1:8080", Usage: "the address to serve on (port 0: a free one)"},
			dashboardTokenFlag(),
			&cli.DurationFlag{Name: "hung-after", Value: panel.DefaultHungAfter, Usage: "a worker whose loop has not turned this long shows as HUNG (the trial's --hung-after; negative: never)"},
		),
		Action: interspersed(runDashboard),
	}
}

// dashboardTokenFlag is the token of a dashboard, rlctl start's and rlctl dashboard's.
func dashboardTokenFlag() cli.Flag {
	return &cli.StringFlag{
		Name: flagDashboardToken, EnvVars: []string{"RLCTL_DASHBOARD_TOKEN"},
		Usage: "the token every dashboard request must carry (default: none on loopback, a random one on any other address; prefer the environment variable: a command line is visible in ps)",
	}
}

func runDashboard(c *cli.Context, args []string) error {
	dir, err := trialArgs(c, "dashboard", args)
	if err != nil {
		return err
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	trial := names.NewTrial(experimentName(args[0]), args[1])
	stop, err := startDashboard(c, c.String("listen"), dir, trial, c.Duration("hung-after"), 0, log)
	if err != nil {
		return err
	}
	defer stop()
	<-c.Context.Done()
	return nil
}

// startDashboard serves the dashboard of trial at addr and prints its
// line; stop ends it. ownPID, if not 0, is the controller the dashboard
// belongs to (rlctl start's own): until its record is written, an older
// run's record in the directory is not followed.
func startDashboard(c *cli.Context, addr string, dir controller.TrialDir, trial names.Trial, hungAfter time.Duration, ownPID int, log *slog.Logger) (stop func(), err error) {
	src := dashboard.NewTrialSource(dir, trial.Experiment, trial.Trial, dashboardConnector(c, dir, trial, hungAfter, ownPID, log))
	srv, err := dashboard.Listen(addr, src, dashboard.ServeOptions{
		Token: c.String(flagDashboardToken), Advertise: worker.RoutableHost(), Logger: log,
	})
	if err != nil {
		return nil, cli.Exit(fmt.Sprintf("--%s %s: %v", flagDashboard, addr, err), exitUsage)
	}
	fmt.Printf("dashboard %s\n", srv.URL())
	return func() {
		_ = srv.Close()
		_ = src.Close()
	}, nil
}

// errNoController: the controller has not said where its name server is yet.
var errNoController = errors.New("waiting for the controller to open its name server")

// dashboardConnector reaches the trial's workers as rlctl status does
// (trialSession), with the trial's HUNG bound.
func dashboardConnector(c *cli.Context, dir controller.TrialDir, trial names.Trial, hungAfter time.Duration, ownPID int, log *slog.Logger) dashboard.Connector {
	return func(ctx context.Context) (*panel.ControlPanel, func(), error) {
		if ownPID != 0 {
			if rec, err := dir.ReadRecord(); err != nil || rec.PID != ownPID || rec.NameResolve == "" {
				return nil, nil, errNoController
			}
		}
		s, err := trialSession(ctx, c, dir, trial, log)
		if err != nil {
			return nil, nil, err
		}
		p := s.panelWith(panel.Options{HungAfter: hungAfter})
		return p, func() {
			p.Close()
			s.Close()
		}, nil
	}
}

// trialSession opens a session on trial through the name server that its
// controller's record in dir names (a live controller's embedded etcd
// too), else that of --nameresolve.
func trialSession(ctx context.Context, c *cli.Context, dir controller.TrialDir, trial names.Trial, log *slog.Logger) (*session, error) {
	rec, recErr := dir.ReadRecord()
	curve, err := curveKeys(c)
	if err != nil {
		return nil, err
	}
	repo, err := openTrialRepo(ctx, c, rec, recErr, log)
	if err != nil {
		return nil, err
	}
	return &session{log: log, trial: trial, repo: repo, curve: curve}, nil
}

// trialEtcdConfig is the etcd client configuration for a trial's name
// server (trialNameResolve), given its controller's record (recErr: none).
func trialEtcdConfig(c *cli.Context, rec *controller.Record, recErr error) (etcd.Config, error) {
	ep, embedded := trialNameResolve(c, rec, recErr)
	cfg, err := etcdConfig(c, ep, embedded)
	cfg.DialTimeout = 2 * time.Second
	return cfg, err
}

// openTrialRepo connects to a trial's name server (trialEtcdConfig); a
// failure is rlctl's exit (nameResolveExit).
func openTrialRepo(ctx context.Context, c *cli.Context, rec *controller.Record, recErr error, log *slog.Logger) (*etcd.Repository, error) {
	cfg, err := trialEtcdConfig(c, rec, recErr)
	if err != nil {
		return nil, err
	}
	cfg.Logger = log
	repo, err := etcd.Open(ctx, cfg)
	if err != nil {
		return nil, nameResolveExit(err)
	}
	return repo, nil
}

// embeddedGone reports whether a trial's name server was its controller's
// embedded etcd and that controller no longer runs: the etcd, and every
// record in it, went with it.
func embeddedGone(rec *controller.Record, recErr error) bool {
	return recErr == nil && rec.EmbeddedEtcd && !rec.Alive()
}

// trialNameResolve is the name server of a trial: the one its
// controller's record names (and whether it is that controller's
// embedded etcd), else --nameresolve.
func trialNameResolve(c *cli.Context, rec *controller.Record, recErr error) (endpoints string, embedded bool) {
	if recErr == nil && rec.NameResolve != "" {
		return rec.NameResolve, rec.EmbeddedEtcd
	}
	return global(c, flagNameResolve), false
}
