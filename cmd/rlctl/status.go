package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/controller/slurm"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
	"github.com/urfave/cli/v2"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a trial: its controller, its last metrics, and every worker's state, address and key stats",
		ArgsUsage: "EXPERIMENT TRIAL",
		Flags:     withGlobal(workdirFlag()),
		Action:    interspersed(runStatus),
	}
}

func runStatus(c *cli.Context, args []string) error {
	dir, err := trialArgs(c, "status", args)
	if err != nil {
		return err
	}
	rec, recErr := dir.ReadRecord()
	if recErr == nil {
		alive := "not running"
		if rec.Alive() {
			alive = "running"
		}
		fmt.Printf("controller: pid %d on %s, %s (%s), started %s\n", rec.PID, rec.Host, rec.State, alive,
			rec.Started.Format(time.RFC3339))
		if rec.Message != "" {
			fmt.Printf("  %s\n", rec.Message)
		}
		if rec.Scheduler == "slurm" {
			fmt.Printf("slurm: scripts in %s, job ids in %s\n", dir.Path(slurm.Dir), dir.Path(slurm.Dir, slurm.JobsFile))
		}
	} else {
		fmt.Printf("no controller record in %s\n", dir)
	}
	if m, err := lastMetrics(dir.Path(controller.MetricsFile)); err == nil {
		fmt.Printf("last metrics (%s): %d env steps, %.0f steps/s, %d episodes", m.Time.Format(time.TimeOnly),
			m.EnvSteps, m.StepsPerS, m.Episodes)
		if m.MeanReturn != nil {
			fmt.Printf(", mean return %.1f", *m.MeanReturn)
		}
		fmt.Printf(", %d restarts\n", m.Restarts)
	}
	if embeddedGone(rec, recErr) {
		return nil
	}
	cfg, err := trialEtcdConfig(c, rec, recErr)
	if err != nil {
		return err
	}
	trial := names.NewTrial(experimentName(args[0]), args[1])
	return workerTable(c.Context, cfg, trial)
}

// workerTable prints every worker of the trial with its key statistics.
func workerTable(ctx context.Context, cfg etcd.Config, trial names.Trial) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	repo, err := etcd.Open(ctx, cfg)
	if err != nil {
		fmt.Printf("workers: %v\n", err) // says the endpoints and whether etcd is unreachable or refused us
		return nil
	}
	defer repo.Close()
	panel := panel.New(repo, trial, panel.Options{})
	defer panel.Close()
	ws, err := panel.Workers(ctx)
	if err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	if len(ws) == 0 {
		fmt.Printf("no workers in %s\n", trial.Prefix())
		return nil
	}
	var live []string
	for _, w := range ws {
		if w.Address != "" && w.Name != controller.CtlName {
			live = append(live, w.Name)
		}
	}
	sctx, scancel := context.WithTimeout(ctx, 3*time.Second)
	defer scancel()
	types := map[string]string{}
	for _, w := range ws {
		types[w.Name] = w.TypeOf()
	}
	stats := map[string]map[string]any{}
	for _, r := range panel.GroupRequest(sctx, live, member.CmdStats, nil) {
		var st map[string]any
		if r.Decode(&st) == nil {
			stats[r.Worker] = controller.KeyStats(types[r.Worker], st)
		}
	}
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKER\tSTATE\tADDRESS\tPID\tSTATS")
	for _, w := range ws {
		note := strings.TrimSpace(controller.FormatStats(stats[w.Name]) + " " + w.Remark())
		pid := "-"
		if w.PID > 0 {
			pid = fmt.Sprint(w.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", w.Name, w.State, orDash(w.Address), pid, note)
	}
	return tw.Flush()
}

// readMetrics reads every line of a metrics.jsonl; a torn last line (the
// controller writing it right now) is skipped.
func readMetrics(path string) ([]controller.Metrics, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []controller.Metrics
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20) // 256 workers make long lines
	for sc.Scan() {
		var m controller.Metrics
		if json.Unmarshal(sc.Bytes(), &m) == nil {
			out = append(out, m)
		}
	}
	return out, sc.Err()
}

func lastMetrics(path string) (*controller.Metrics, error) {
	all, err := readMetrics(path)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, fmt.Errorf("%s: no metrics yet", path)
	}
	return &all[len(all)-1], nil
}
