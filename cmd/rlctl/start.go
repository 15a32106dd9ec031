package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/controller/slurm"
	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/panel"
	"github.com/urfave/cli/v2"
)

// Exit codes of rlctl start.
const (
	exitFailed      = 1
	exitUsage       = 2 // a bad command line or configuration
	exitInterrupted = 130
)

func startCommand() *cli.Command {
	return &cli.Command{
		Name:      "start",
		Usage:     "run a trial: start, configure and monitor an experiment's workers until it stops",
		ArgsUsage: "EXPERIMENT|FILE.yaml TRIAL",
		Description: "Runs every worker as a process, restarts failed ones, writes metrics.jsonl and logs to the\n" +
			"trial directory, and stops at the experiment's stop condition or on Ctrl-C / SIGTERM / `rlctl stop`.\n" +
			"Uses the etcd of --nameresolve, or runs an embedded one for the trial when none answers there.\n" +
			"With --scheduler slurm every worker type is an sbatch job array (scripts, job ids and logs in the trial\n" +
			"directory, which must be on a filesystem the nodes share) and --nameresolve must be an etcd the nodes reach.\n" +
			"Exit code: 0 completed, 130 interrupted, 1 failed, 2 bad configuration or command line.\n" +
			"Example: rlctl start cartpole-sink t1 --set stop.env_steps=20000 --set workers.actor.count=4",
		Flags: withGlobal(
			&cli.StringFlag{Name: "scheduler", Value: "local", Usage: "how workers run: local (child processes) or slurm (sbatch job arrays, one per worker type)"},
			workdirFlag(),
			&cli.StringFlag{Name: "host", EnvVars: []string{"RLCTL_HOST"}, Usage: "address the controller (and local workers) bind and advertise (default: 127.0.0.1; with slurm, this machine's address on the interface that routes to the name server)"},
			&cli.StringFlag{Name: "partition", Usage: "slurm: the partition (sbatch --partition)"},
			&cli.StringFlag{Name: "account", Usage: "slurm: the account (sbatch --account)"},
			&cli.StringFlag{Name: "time", Usage: "slurm: the workers' time limit (sbatch --time), such as 2:00:00"},
			&cli.StringSliceFlag{Name: "sbatch-arg", Usage: "slurm: one more sbatch option for every worker script (repeatable): --sbatch-arg=--qos=high"},
			&cli.DurationFlag{Name: "register-timeout", Usage: "how long workers may take to register (default 30s + 250ms per worker; raise it where slurm jobs queue)"},
			&cli.DurationFlag{Name: "hung-after", Value: panel.DefaultHungAfter, Usage: "a worker whose loop has not turned this long is HUNG: killed and restarted (negative: never)"},
			&cli.DurationFlag{Name: "worker-ttl", Value: controller.DefaultWorkerTTL, Usage: "the workers' address lease: how long a killed or stopped process stays registered"},
			&cli.DurationFlag{Name: "orphan-timeout", Value: controller.DefaultOrphanTimeout, Usage: "workers interrupt themselves when the controller's record has been gone this long (negative: never)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "slurm: write and print the sbatch scripts, submit nothing"},
			&cli.BoolFlag{Name: "no-metrics", Usage: "the workers serve no Prometheus metrics (by default each worker process serves /metrics on a free port, found through service discovery: docs/metrics.md)"},
			&cli.StringFlag{Name: flagDashboard, Usage: "serve the trial's live dashboard, /sd and /metrics at this address (127.0.0.1:8080; port 0: a free one) from the start until the controller exits; it prints the line: dashboard URL. Beyond loopback every request needs the token (see --dashboard-token)"},
			dashboardTokenFlag(),
			&cli.StringFlag{Name: "cuda-binary", EnvVars: []string{"RLCTL_CUDA_BINARY"}, Usage: "the rlctl built with CUDA (make build-cuda) that runs the workers on a CUDA device (default: rlctl-cuda beside this rlctl); with slurm at the same path on every node"},
			&cli.GenericFlag{Name: "set", Value: &setList{}, Usage: "override a configuration value, key a dotted path (repeatable): --set workers.actor.count=4"},
		),
		Action: interspersed(runStart),
	}
}

func runStart(c *cli.Context, args []string) error {
	if len(args) != 2 {
		return cli.Exit("usage: rlctl start EXPERIMENT|FILE.yaml TRIAL [--set key=value ...] (built-in experiments: rlctl experiments)", exitUsage)
	}
	types, err := builtinTypes()
	if err != nil {
		return err
	}
	cfg, err := loadExperiment(args[0])
	if err != nil {
		return cli.Exit(configError(err), exitUsage)
	}
	for _, s := range *c.Generic("set").(*setList) {
		if err := cfg.Set(s); err != nil {
			return cli.Exit(configError(err), exitUsage)
		}
	}
	if err := cfg.Validate(types.Types()); err != nil {
		return cli.Exit(configError(err), exitUsage)
	}
	// count: auto is resolved here, on the machine of the controller, before
	// a plan is printed (--dry-run) or started.
	cfg.ResolveCounts(runtime.NumCPU())
	dir, err := trialDir(c, cfg.Name, args[1])
	if err != nil {
		return err
	}
	// Each worker type checks its workers' configuration (the first and
	// the last of each group) before anything starts, --dry-run included.
	// What the check's environments log (a Python host's stderr) is left
	// out: the one line says why.
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.DiscardHandler))
	err = controller.CheckWorkers(cfg, types, dir.Path(controller.CheckpointsDir))
	slog.SetDefault(prev)
	if err != nil {
		return cli.Exit("invalid worker configuration: "+err.Error(), exitUsage)
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	curve, err := curveKeys(c)
	if err != nil {
		return err
	}
	sec, err := nameResolveSecurity(c)
	if err != nil {
		return err
	}
	workerArgs := []string{"--" + flagLogLevel, global(c, flagLogLevel)}
	if path := global(c, flagCurveKeys); path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return cli.Exit(err.Error(), exitUsage)
		}
		workerArgs = append(workerArgs, "--"+flagCurveKeys, abs)
	}
	opts := controller.Options{
		Config: cfg, Trial: args[1], Dir: dir, Host: c.String("host"),
		NameResolve: endpoints(global(c, flagNameResolve)), NameResolveSecurity: sec, WorkerArgs: workerArgs, Curve: curve,
		Out: os.Stdout, TTY: controller.IsTerminal(os.Stdout), Logger: log,
		RegisterTimeout: c.Duration("register-timeout"), OrphanTimeout: c.Duration("orphan-timeout"),
		HungAfter: c.Duration("hung-after"), WorkerTTL: c.Duration("worker-ttl"),
		CUDABinary: c.String("cuda-binary"), Types: types, NoMetrics: c.Bool("no-metrics"),
	}
	switch s := c.String("scheduler"); s {
	case "local":
		if c.Bool("dry-run") {
			return cli.Exit("--dry-run: only with --scheduler slurm (the local scheduler has no scripts)", exitUsage)
		}
		sched, err := controller.NewLocal("")
		if err != nil {
			return cli.Exit(err.Error(), exitFailed)
		}
		opts.Scheduler, opts.SchedulerName = sched, "local"
		// Workers on a CUDA device run here: check the device before anything starts.
		if err := controller.CheckDevices(c.Context, opts); err != nil {
			return cli.Exit(err.Error(), exitFailed)
		}
	case "slurm":
		sched, err := slurmOptions(c, &opts, log)
		if err != nil {
			return err
		}
		if c.Bool("dry-run") {
			if err := sched.DryRun(opts, os.Stdout); err != nil {
				return cli.Exit(err.Error(), exitFailed)
			}
			return nil
		}
	default:
		return cli.Exit(fmt.Sprintf("--scheduler %q: want local or slurm", s), exitUsage)
	}
	if addr := c.String(flagDashboard); addr != "" {
		stop, err := startDashboard(c, addr, dir, names.NewTrial(cfg.Name, args[1]), opts.HungAfter, os.Getpid(), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	res, err := controller.Run(c.Context, opts)
	switch res.Outcome {
	case controller.Completed:
		return nil
	case controller.Interrupted:
		return cli.Exit("", exitInterrupted)
	}
	// The summary above has the whole story; stderr gets its first line.
	msg, _, _ := strings.Cut(err.Error(), "\n")
	if errors.Is(err, controller.ErrNameResolve) {
		return cli.Exit(msg, exitUsage)
	}
	return cli.Exit(msg, exitFailed)
}

// slurmOptions sets opts up for the slurm scheduler and checks, submitting
// nothing, that SLURM and the name server can take the trial: a bad
// command line or cluster is one line and exit 2. (--dry-run skips the
// SLURM check: it is for reading scripts anywhere.)
func slurmOptions(c *cli.Context, opts *controller.Options, log *slog.Logger) (*slurm.Scheduler, error) {
	if err := controller.CheckRemoteNameResolve(opts.NameResolve); err != nil {
		return nil, cli.Exit(err.Error(), exitUsage)
	}
	if opts.Host == "" {
		h, err := worker.RouteHost(opts.NameResolve[0])
		if err != nil {
			return nil, cli.Exit(err.Error(), exitUsage)
		}
		opts.Host = h
	}
	sched, err := slurm.New(slurm.Options{
		Partition: c.String("partition"), Account: c.String("account"), Time: c.String("time"),
		SbatchArgs: c.StringSlice("sbatch-arg"), Logger: log,
	}, opts.Dir, names.NewTrial(opts.Config.Name, opts.Trial))
	if err != nil {
		return nil, cli.Exit(err.Error(), exitFailed)
	}
	opts.Scheduler, opts.SchedulerName, opts.RemoteWorkers = sched, "slurm", true
	if c.Bool("dry-run") {
		return sched, nil
	}
	if err := sched.Check(c.Context, *opts); err != nil {
		return nil, cli.Exit(err.Error(), exitUsage)
	}
	return sched, nil
}

// configError renders a configuration error, one field a line.
func configError(err error) string {
	var fe *experiment.FieldError
	if !errors.As(err, &fe) {
		return "experiment configuration: " + err.Error()
	}
	return "invalid experiment configuration:\n  " + strings.ReplaceAll(err.Error(), "\n", "\n  ")
}

// endpoints splits a comma-separated endpoint list.
func endpoints(list string) []string {
	var out []string
	for _, e := range strings.Split(list, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}
