package dashboard

import (
	"context"
	"strconv"
	"strings"

	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker/member"
	"github.com/prometheus/client_golang/prometheus"
)

// trialStates are the states distrl_trial_workers always reports (0
// where no worker is in it), so that a query sees a series drop to 0
// instead of vanish.
var trialStates = []string{
	string(member.StateReady), string(member.StateConfigured), string(member.StateRunning), string(member.StatePaused),
	string(member.StateCompleted), string(member.StateError), string(member.StateInterrupted),
	string(member.StateLost), string(member.StateHung), "UNKNOWN",
}

// trialCollector reports the trial-level metrics from the dashboard's
// snapshot at scrape time: the figures of metrics.jsonl's last line, the
// workers by state and their restarts. Every series carries the labels
// experiment and trial.
type trialCollector struct {
	h                                                             *Handler
	envSteps, episodes, rate, ret, lag, dropped, version, elapsed *prometheus.Desc
	workers, restarts, workerRestarts, bestReturn, bestVersion    *prometheus.Desc
}

func newTrialCollector(h *Handler) *trialCollector {
	exp, trial := h.src.Names()
	labels := prometheus.Labels{"experiment": exp, "trial": trial}
	desc := func(name, help string, variable ...string) *prometheus.Desc {
		return prometheus.NewDesc(telemetry.Namespace+"_trial_"+name, help, variable, labels)
	}
	return &trialCollector{
		h:        h,
		envSteps: desc("env_steps_total", "Environment steps of the trial's actors, restarted processes included."),
		episodes: desc("episodes_total", "Episodes the trial's actors ended, restarted processes included."),
		rate:     desc("env_steps_per_second", "Environment steps per second over the last metrics interval."),
		ret:      desc("mean_return", "Mean return of the recent episodes (the trainer's, else the actors')."),
		lag:      desc("policy_lag", "The trainer's mean policy lag in parameter versions."),
		dropped:  desc("dropped_share", "The share of the steps PPO trainers took in that they dropped as stale."),
		version:  desc("policy_version", "The parameter version trained (else the newest served)."),
		elapsed:  desc("elapsed_seconds", "Time since every worker was running."),
		workers:  desc("workers", "Workers of the trial by state (HUNG and LOST as the control panel concludes them).", "state"),
		restarts: desc("restarts_total", "Restarts of the trial's worker processes."),
		workerRestarts: desc("worker_restarts_total", "Restarts of the process that runs the worker.",
			"type", "index", "group"),
		bestReturn:  desc("best_return", "The best mean return an evaluator measured of a kept version (one that tags the best)."),
		bestVersion: desc("best_version", "The kept version of that return."),
	}
}

func (c *trialCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.envSteps, c.episodes, c.rate, c.ret, c.lag, c.dropped, c.version, c.elapsed,
		c.workers, c.restarts, c.workerRestarts, c.bestReturn, c.bestVersion} {
		ch <- d
	}
}

func (c *trialCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), snapshotTimeout)
	defer cancel()
	snap, err := c.h.snapshot(ctx, false)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.workers, err)
		return
	}
	if p := snap.Last; p != nil {
		ch <- prometheus.MustNewConstMetric(c.envSteps, prometheus.CounterValue, float64(p.EnvSteps))
		ch <- prometheus.MustNewConstMetric(c.episodes, prometheus.CounterValue, float64(p.Episodes))
		ch <- prometheus.MustNewConstMetric(c.rate, prometheus.GaugeValue, p.StepsPerS)
		ch <- prometheus.MustNewConstMetric(c.elapsed, prometheus.GaugeValue, p.ElapsedS)
		if p.MeanReturn != nil {
			ch <- prometheus.MustNewConstMetric(c.ret, prometheus.GaugeValue, *p.MeanReturn)
		}
		if p.PolicyLag != nil {
			ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, *p.PolicyLag)
		}
		if p.DroppedShare != nil {
			ch <- prometheus.MustNewConstMetric(c.dropped, prometheus.GaugeValue, *p.DroppedShare)
		}
		if p.Version != nil {
			ch <- prometheus.MustNewConstMetric(c.version, prometheus.GaugeValue, float64(*p.Version))
		}
		if p.BestReturn != nil && p.BestVersion != nil {
			ch <- prometheus.MustNewConstMetric(c.bestReturn, prometheus.GaugeValue, *p.BestReturn)
			ch <- prometheus.MustNewConstMetric(c.bestVersion, prometheus.GaugeValue, float64(*p.BestVersion))
		}
	}
	byState := map[string]int{}
	for _, w := range snap.Workers {
		byState[w.State]++
		group, _, _ := strings.Cut(w.Name, "/")
		ch <- prometheus.MustNewConstMetric(c.workerRestarts, prometheus.CounterValue, float64(w.Restarts),
			w.Type, strconv.Itoa(w.Index), group)
	}
	for _, s := range trialStates {
		ch <- prometheus.MustNewConstMetric(c.workers, prometheus.GaugeValue, float64(byState[s]), s)
	}
	ch <- prometheus.MustNewConstMetric(c.restarts, prometheus.CounterValue, float64(snap.Controller.Restarts))
}
