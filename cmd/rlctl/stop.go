package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/controller/slurm"
	"github.com/distrl/distrl/nameresolve/etcd"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
	"github.com/urfave/cli/v2"
)

func stopCommand() *cli.Command {
	return &cli.Command{
		Name:      "stop",
		Usage:     "stop a running trial: its controller stops the workers in order, as on Ctrl-C",
		ArgsUsage: "EXPERIMENT TRIAL",
		Description: "Sends SIGINT to the trial's controller (its pid is in controller.json) and waits for it.\n" +
			"Without a live controller on this machine, interrupts the trial's controller or workers through the name server.",
		Flags: withGlobal(
			workdirFlag(),
			&cli.DurationFlag{Name: "timeout", Value: time.Minute, Usage: "how long to wait for the trial to stop"},
		),
		Action: interspersed(runStop),
	}
}

func runStop(c *cli.Context, args []string) error {
	dir, err := trialArgs(c, "stop", args)
	if err != nil {
		return err
	}
	rec, recErr := dir.ReadRecord()
	if recErr == nil && rec.Alive() {
		if err := syscall.Kill(rec.PID, syscall.SIGINT); err != nil {
			return cli.Exit(fmt.Sprintf("signal the controller (pid %d): %v", rec.PID, err), exitFailed)
		}
		fmt.Printf("sent SIGINT to the controller of %s/%s (pid %d); waiting for it to stop\n", rec.Experiment, rec.Trial, rec.PID)
		deadline := time.Now().Add(c.Duration("timeout"))
		for controller.ProcessAlive(rec.PID) {
			if time.Now().After(deadline) {
				return cli.Exit(fmt.Sprintf("the controller (pid %d) is still running after %v", rec.PID, c.Duration("timeout")), exitFailed)
			}
			select {
			case <-c.Context.Done():
				return cli.Exit("", exitInterrupted)
			case <-time.After(100 * time.Millisecond):
			}
		}
		if rec, err := dir.ReadRecord(); err == nil {
			fmt.Printf("trial %s: %s\n", rec.State, rec.Message)
		}
		return nil
	}
	// No controller here: reach the trial through its name server.
	ep := global(c, flagNameResolve)
	if recErr == nil && !rec.EmbeddedEtcd && rec.NameResolve != "" {
		ep = rec.NameResolve
	}
	trial := names.NewTrial(experimentName(args[0]), args[1])
	deadline := time.Now().Add(c.Duration("timeout"))
	cfg, err := etcdConfig(c, ep, false)
	if err != nil {
		return err
	}
	cfg.DialTimeout = 2 * time.Second
	repo, err := etcd.Open(c.Context, cfg)
	stopped := 0
	if err == nil {
		defer repo.Close()
		// A record of this host whose controller process is gone: its ctl
		// record may outlive it (a SIGKILL leaves the lease to expire),
		// and asking it would wait out a timeout.
		host, _ := os.Hostname()
		gone := recErr == nil && rec.Host == host
		stopped, err = interruptTrial(c.Context, repo, trial, gone)
	}
	var pids []int
	if recErr == nil {
		pids = signalWorkers(rec)
		stopped += len(pids)
		if rec.Scheduler == "slurm" {
			if serr := cancelSlurmJobs(c, dir, trial); serr != nil {
				fmt.Fprintln(os.Stderr, prog+":", serr)
			} else {
				fmt.Printf("cancelled the slurm jobs of %s\n", trial.Prefix())
			}
		}
	}
	if err != nil && stopped == 0 && recErr == nil && rec.EmbeddedEtcd {
		// The name server died with its controller: nothing is registered.
		fmt.Printf("the controller of %s is gone, with its name server; no worker of it runs here\n", trial.Prefix())
		return nil
	}
	if err != nil && stopped == 0 {
		return cli.Exit(fmt.Sprintf("no live controller for %s and %v", trial.Prefix(), err), exitFailed)
	}
	fmt.Printf("interrupted %d workers of %s\n", stopped, trial.Prefix())
	if err := waitStopped(c.Context, repo, trial, pids, deadline); err != nil {
		return cli.Exit(err.Error(), exitFailed)
	}
	if repo != nil {
		// Nobody else will: the controller that owned the records is gone.
		if err := controller.ClearRecords(c.Context, repo, trial); err != nil {
			return cli.Exit(fmt.Sprintf("clear the records of %s: %v", trial.Prefix(), err), exitFailed)
		}
		fmt.Printf("cleared the records of %s\n", trial.Prefix())
	}
	return nil
}

// interruptTrial asks the trial's controller to stop, if one is registered
// and not known to be gone (controllerGone), which stops the workers in
// order; else, or when it does not answer within ctlTimeout, it interrupts
// every registered worker. It returns how many it reached.
func interruptTrial(ctx context.Context, repo *etcd.Repository, trial names.Trial, controllerGone bool) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cp := panel.New(repo, trial, panel.Options{})
	defer cp.Close()
	live, err := cp.AutoConnect(ctx)
	if err != nil {
		return 0, err
	}
	workers := slices.DeleteFunc(slices.Clone(live), func(w string) bool { return w == controller.CtlName })
	if len(workers) < len(live) && !controllerGone {
		cctx, ccancel := context.WithTimeout(ctx, ctlTimeout)
		err := cp.Request(cctx, controller.CtlName, member.CmdInterrupt, nil, nil)
		ccancel()
		if err == nil {
			return 1, nil
		}
	}
	n := 0
	for _, r := range cp.GroupRequest(ctx, workers, member.CmdInterrupt, nil) {
		if r.Err == nil {
			n++
		}
	}
	return n, nil
}

// ctlTimeout bounds the wait for a registered controller elsewhere to
// answer "interrupt": a live one answers in milliseconds.
const ctlTimeout = 2 * time.Second

// waitStopped waits until the signalled processes have exited and no
// member of the trial is registered (repo may be nil: no name server).
func waitStopped(ctx context.Context, repo *etcd.Repository, trial names.Trial, pids []int, deadline time.Time) error {
	for {
		var alive []string
		for _, pid := range pids {
			if controller.ProcessAlive(pid) {
				alive = append(alive, fmt.Sprintf("pid %d", pid))
			}
		}
		if repo != nil {
			fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			live, err := repo.Find(fctx, trial.WorkerPrefix())
			cancel()
			for _, e := range live {
				alive = append(alive, strings.TrimPrefix(e.Key, trial.WorkerPrefix()))
			}
			if err != nil {
				alive = append(alive, "name server: "+err.Error())
			}
		}
		if len(alive) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("still running or registered after the timeout: %s", strings.Join(alive, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// signalWorkers sends SIGTERM to the worker processes a dead controller
// left, where they still run on this machine (after a SIGKILL of the
// controller they get it from the kernel anyway). It returns the pids
// it signalled.
func signalWorkers(rec *controller.Record) []int {
	host, _ := os.Hostname()
	if rec.Host != host {
		return nil
	}
	var pids []int
	seen := map[int]bool{} // the workers of a host process share its pid
	for _, pid := range rec.Workers {
		if seen[pid] || !controller.ProcessAlive(pid) || !isWorkerProcess(pid) {
			continue
		}
		seen[pid] = true
		if syscall.Kill(pid, syscall.SIGTERM) == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// isWorkerProcess checks that pid still runs `rlctl worker`, not another
// program that was given the pid since.
func isWorkerProcess(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	args := strings.Split(string(b), "\x00")
	return len(args) > 1 && args[1] == "worker"
}

// cancelSlurmJobs scancels the jobs a dead controller of a slurm trial
// left: the workers might otherwise run until their time limit.
func cancelSlurmJobs(c *cli.Context, dir controller.TrialDir, trial names.Trial) error {
	s, err := slurm.New(slurm.Options{}, dir, trial)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(c.Context, 30*time.Second)
	defer cancel()
	return s.CancelTrial(ctx)
}
