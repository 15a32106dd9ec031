package main

import (
	"context"
	"encoding/json"
	"os"
	"time"

	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/telemetry"
	"github.com/urfave/cli/v2"
)

func sdCommand() *cli.Command {
	return &cli.Command{
		Name:      "sd",
		Usage:     "print a trial's Prometheus service discovery document (http_sd_configs JSON) from its workers' records",
		ArgsUsage: "EXPERIMENT TRIAL",
		Description: "One target group per worker process that serves /metrics, with the labels __meta_distrl_experiment,\n" +
			"__meta_distrl_trial, __meta_distrl_host, __meta_distrl_workers and process. For a trial whose controller runs\n" +
			"elsewhere (its dashboard serves the same document at /sd, itself included); docs/metrics.md has a scrape config.",
		Flags:  withGlobal(workdirFlag()),
		Action: interspersed(runSD),
	}
}

func runSD(c *cli.Context, args []string) error {
	dir, err := trialArgs(c, "sd", args)
	if err != nil {
		return err
	}
	log, err := logger(c)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()
	trial := names.NewTrial(experimentName(args[0]), args[1])
	s, err := trialSession(ctx, c, dir, trial, log)
	if err != nil {
		return err
	}
	defer s.Close()
	p := s.panel()
	defer p.Close()
	statuses, err := p.Workers(ctx)
	if err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(telemetry.Targets(trial.Experiment, trial.Trial, statuses))
}
