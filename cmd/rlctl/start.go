package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/worker"
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
			"Exit code: 0 completed, 130 interrupted, 1 failed, 2 bad configuration.\n" +
			"Example: rlctl start cartpole-sink t1 --set stop.env_steps=20000 --set workers.actor.count=4",
		Flags: withGlobal(
			&cli.StringFlag{Name: "scheduler", Value: "local", Usage: "how workers run: local (child processes)"},
			workdirFlag(),
			&cli.GenericFlag{Name: "set", Value: &setList{}, Usage: "override a configuration value, key a dotted path (repeatable): --set workers.actor.count=4"},
		),
		Action: interspersed(runStart),
	}
}

func runStart(c *cli.Context, args []string) error {
	if len(args) != 2 {
		return cli.Exit("usage: rlctl start EXPERIMENT|FILE.yaml TRIAL [--set key=value ...] (built-in experiments: rlctl experiments)", exitUsage)
	}
	if err := registerWorkerTypes(); err != nil {
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
	if err := cfg.Validate(worker.Types()); err != nil {
		return cli.Exit(configError(err), exitUsage)
	}
	dir, err := trialDir(c, cfg.Name, args[1])
	if err != nil {
		return err
	}
	if s := c.String("scheduler"); s != "local" {
		return cli.Exit(fmt.Sprintf("--scheduler %q: want local", s), exitUsage)
	}
	sched, err := controller.NewLocal("")
	if err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	curve, err := curveKeys(c)
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
	res, err := controller.Run(c.Context, controller.Options{
		Config: cfg, Trial: args[1], Dir: dir, Scheduler: sched, SchedulerName: "local",
		NameResolve: endpoints(global(c, flagNameResolve)), WorkerArgs: workerArgs, Curve: curve,
		Out: os.Stdout, TTY: controller.IsTerminal(os.Stdout), Logger: log,
	})
	switch res.Outcome {
	case controller.Completed:
		return nil
	case controller.Interrupted:
		return cli.Exit("", exitInterrupted)
	}
	// The summary above has the whole story; stderr gets its first line.
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return cli.Exit(msg, exitFailed)
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
