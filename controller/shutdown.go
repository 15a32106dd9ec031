package controller

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"

	"github.com/distrl/distrl/worker/member"
)

// shutdown stops the trial: workers are told to exit (completed) or
// interrupt (otherwise) in reverse start order, given StopGrace, then
// signalled and killed; their records are cleared, the embedded etcd
// stopped, the record finished and a summary printed.
func (c *Controller) shutdown(outcome Outcome, reason string) Result {
	close(c.quit)
	c.restartWG.Wait()
	c.record.State = StateStopping
	c.writeRecord()
	res := Result{Outcome: outcome, Reason: reason, Restarts: c.restarts, Dir: c.dir}
	if !c.running.IsZero() {
		res.Startup = c.running.Sub(c.began)
		// One last poll, so that metrics.jsonl ends with the final figures.
		res.Metrics = c.collect(context.Background())
		res.Elapsed = time.Since(c.running)
	}
	c.out.done()
	if len(c.members) > 0 {
		if outcome == Failed {
			c.out.event("stopping %d workers", len(c.members)) // the summary says why
		} else {
			c.out.event("stopping %d workers: %s", len(c.members), reason)
		}
		c.stopWorkers(outcome)
	}
	if c.repo != nil && c.owner {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		if err := saveVersions(ctx, c.repo, c.trial, c.dir.Path(VersionsFile)); err != nil {
			c.log.Warn("the kept versions' records were not saved", "file", c.dir.Path(VersionsFile), "err", err)
		}
		if err := ClearRecords(ctx, c.repo, c.trial); err != nil {
			c.log.Warn("the trial's records were not cleared", "prefix", c.trial.Prefix(), "err", err)
		}
		cancel()
	}
	if c.ctl != nil {
		_ = c.ctl.Close()
	}
	if c.panel != nil {
		_ = c.panel.Close()
	}
	if c.repo != nil {
		_ = c.repo.Close()
	}
	if c.etcd != nil {
		c.etcdQuiet.Store(true)
		if err := c.etcd.Close(); err != nil {
			c.log.Warn("embedded etcd did not stop cleanly", "err", err)
		}
		// Its records were the trial's, cleared above: nothing to keep.
		if err := os.RemoveAll(c.dir.Path(EtcdDir)); err != nil {
			c.log.Warn("embedded etcd data not removed", "err", err)
		}
	}
	if c.metrics != nil {
		_ = c.metrics.Close()
	}
	end := time.Now()
	c.record.Ended = &end
	c.record.State = map[Outcome]string{Completed: StateCompleted, Interrupted: StateInterrupted, Failed: StateFailed}[outcome]
	c.record.Message = reason
	c.writeRecord()
	c.summary(res)
	return res
}

// stopWorkers tells every worker to stop, waits up to StopGrace, then has
// the scheduler signal and kill what is left.
func (c *Controller) stopWorkers(outcome Outcome) {
	cmd := member.CmdInterrupt
	if outcome == Completed {
		cmd = member.CmdExit
	}
	// Reverse start order: producers stop before the consumers they feed.
	groups := c.cfg.Groups()
	slices.Reverse(groups)
	for _, group := range groups {
		var live []string
		for _, m := range c.group(group) {
			select {
			case <-m.proc.handle.Done():
			default:
				live = append(live, m.name)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		_ = c.requestGroup(ctx, live, cmd, nil) // a worker that does not answer is signalled below
		cancel()
	}
	grace := time.NewTimer(c.opts.StopGrace)
	defer grace.Stop()
wait:
	for _, p := range c.procs {
		select {
		case <-p.handle.Done():
		case <-grace.C:
			break wait
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := c.opts.Scheduler.StopAll(ctx); err != nil {
		c.out.event("%v", err)
	}
}

// summary prints how the trial went.
func (c *Controller) summary(r Result) {
	c.out.event("trial %s/%s %s: %s", c.cfg.Name, c.opts.Trial, r.Outcome, r.Reason)
	if m := r.Metrics; m != nil {
		line := fmt.Sprintf("  ran %s (start-up %s), %d restarts", r.Elapsed.Round(time.Millisecond),
			r.Startup.Round(time.Millisecond), r.Restarts)
		if m.EnvSteps > 0 {
			line += fmt.Sprintf("; %d env steps (%.0f/s on average), %d episodes", m.EnvSteps,
				float64(m.EnvSteps)/max(r.Elapsed.Seconds(), 1e-9), m.Episodes)
		}
		if m.MeanReturn != nil {
			line += fmt.Sprintf(", mean return %.1f", *m.MeanReturn)
		}
		if m.Version != nil {
			line += fmt.Sprintf(", version %d", *m.Version)
		}
		c.out.event("%s", line)
	}
	c.out.event("  trial directory %s", c.dir)
}

// ClearRecords removes a trial's records from name resolve, except its
// kept parameter versions (trial.VersionsPrefix()): they are the trial's
// results, like its checkpoints, and a trial run again (or resumed) finds
// them. It clears each subtree of the trial's prefix on its own, so that
// no range delete reaches the versions.
func ClearRecords(ctx context.Context, repo nameresolve.Repository, trial names.Trial) error {
	entries, err := repo.Find(ctx, trial.Prefix())
	if err != nil {
		return err
	}
	keep := strings.TrimSuffix(strings.TrimPrefix(trial.VersionsPrefix(), trial.Prefix()), "/")
	seen := map[string]bool{}
	var errs []error
	for _, e := range entries {
		seg, _, sub := strings.Cut(strings.TrimPrefix(e.Key, trial.Prefix()), "/")
		if seg == keep || seen[seg] {
			continue
		}
		seen[seg] = true
		if sub {
			errs = append(errs, repo.ClearSubtree(ctx, trial.Prefix()+seg+"/"))
		}
		if err := repo.Delete(ctx, trial.Prefix()+seg); err != nil && !errors.Is(err, nameresolve.ErrNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
