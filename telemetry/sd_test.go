package telemetry

import (
	"reflect"
	"testing"

	"github.com/distrl/distrl/worker/member"
)

func TestTargets(t *testing.T) {
	st := func(name string, state member.State, metrics string) member.Status {
		return member.Status{Name: name, State: state, Metrics: metrics, Host: "node1"}
	}
	ctl := TargetGroup{Targets: []string{"127.0.0.1:8080"}, Labels: map[string]string{LabelProcess: "ctl"}}
	group := func(addr string, workers ...string) TargetGroup {
		ws := workers[0]
		for _, w := range workers[1:] {
			ws += "," + w
		}
		return TargetGroup{Targets: []string{addr}, Labels: map[string]string{
			LabelProcess: workers[0], LabelExperiment: "exp", LabelTrial: "t1", LabelHost: "node1", LabelWorkers: ws,
		}}
	}
	for _, tc := range []struct {
		name     string
		statuses []member.Status
		extra    []TargetGroup
		want     []TargetGroup
	}{
		{name: "none", want: []TargetGroup{}},
		{
			name: "one process per worker, sorted by worker",
			statuses: []member.Status{
				st("policy/0", member.StateRunning, "10.0.0.1:9002"),
				st("actor/0", member.StateRunning, "10.0.0.1:9001"),
			},
			want: []TargetGroup{group("10.0.0.1:9001", "actor/0"), group("10.0.0.1:9002", "policy/0")},
		},
		{
			name: "hosted workers share one target",
			statuses: []member.Status{
				st("actor/1", member.StateRunning, "10.0.0.1:9001"),
				st("actor/0", member.StateHung, "10.0.0.1:9001"),
			},
			extra: []TargetGroup{ctl},
			want:  []TargetGroup{group("10.0.0.1:9001", "actor/0", "actor/1"), ctl},
		},
		{
			name: "final states and workers without metrics are left out",
			statuses: []member.Status{
				st("actor/0", member.StateLost, "10.0.0.1:9001"),
				st("actor/1", member.StateCompleted, "10.0.0.1:9003"),
				st("actor/2", member.StateRunning, ""),
				st("trainer/0", member.StatePaused, "10.0.0.2:9004"),
			},
			want: []TargetGroup{{Targets: []string{"10.0.0.2:9004"}, Labels: map[string]string{
				LabelProcess: "trainer/0", LabelExperiment: "exp", LabelTrial: "t1", LabelHost: "node1", LabelWorkers: "trainer/0",
			}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Targets("exp", "t1", tc.statuses, tc.extra...)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Targets:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
