package telemetry

import (
	"cmp"
	"slices"
	"strings"

	"github.com/distrl/distrl/worker/member"
)

// TargetGroup is one entry of a Prometheus HTTP service discovery
// document (http_sd_configs): the /metrics addresses of processes and
// their labels.
type TargetGroup struct {
	Targets []string          `json:"targets"`
	Labels  map[string]string `json:"labels"`
}

// Labels of the service discovery document. The __meta_ ones are for
// relabelling (Prometheus drops them after); process names the process
// in the series it exposes about itself (go_*, process_*), which carry no
// worker labels.
const (
	LabelProcess    = "process"
	LabelExperiment = "__meta_distrl_experiment"
	LabelTrial      = "__meta_distrl_trial"
	LabelHost       = "__meta_distrl_host"
	LabelWorkers    = "__meta_distrl_workers"
)

// Targets is the service discovery document of a trial: one group per
// metrics address that a live worker's status record names (the workers a
// process hosts share one), in the order of their first worker's name,
// then extra (the controller's own, say). Workers in a final state, or
// that serve no metrics, are left out.
func Targets(experiment, trial string, statuses []member.Status, extra ...TargetGroup) []TargetGroup {
	byAddr := map[string][]member.Status{}
	for _, s := range statuses {
		if s.Metrics == "" || s.State.Final() {
			continue
		}
		byAddr[s.Metrics] = append(byAddr[s.Metrics], s)
	}
	groups := make([]TargetGroup, 0, len(byAddr)+len(extra))
	for addr, ss := range byAddr {
		slices.SortFunc(ss, func(a, b member.Status) int { return cmp.Compare(a.Name, b.Name) })
		names := make([]string, len(ss))
		for i, s := range ss {
			names[i] = s.Name
		}
		groups = append(groups, TargetGroup{Targets: []string{addr}, Labels: map[string]string{
			LabelProcess: names[0], LabelExperiment: experiment, LabelTrial: trial,
			LabelHost: ss[0].Host, LabelWorkers: strings.Join(names, ","),
		}})
	}
	slices.SortFunc(groups, func(a, b TargetGroup) int { return cmp.Compare(a.Labels[LabelProcess], b.Labels[LabelProcess]) })
	return append(groups, extra...)
}
