package experiment

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// twoPolicies is a trial of two policies, red and blue, each with its own
// policy workers, trainer and sample stream; one actor group maps its
// agents to both.
const twoPolicies = `
name: t
workers:
  trainer-red: {type: trainer, count: 1, config: {policy: red, sample_stream: red}}
  trainer-blue: {type: trainer, count: 1, config: {policy: blue, sample_stream: blue}}
  policy-red: {type: policy, count: 1, config: {policy: red}}
  policy-blue: {type: policy, count: auto, config: {policy: blue}}
  actor:
    count: 2
    config:
      env: simple_spread
      agents:
        - {match: agent_0, policy: red}
        - {indices: [1, 2], policy: blue, sample_stream: blue}
`

func TestPolicies(t *testing.T) {
	c := parse(t, twoPolicies)
	if err := c.Validate(allTypes); err != nil {
		t.Fatal(err)
	}
	ps := c.Policies()
	if len(ps) != 2 || ps[0].Name != "blue" || ps[1].Name != "red" {
		t.Fatalf("Policies() = %v, want blue and red", ps)
	}
	blue, red := ps[0], ps[1]
	if !reflect.DeepEqual(red.Servers, []string{"policy-red"}) || !reflect.DeepEqual(red.Trainers, []string{"trainer-red"}) {
		t.Errorf("red: servers %v trainers %v", red.Servers, red.Trainers)
	}
	if !reflect.DeepEqual(blue.Servers, []string{"policy-blue"}) || !reflect.DeepEqual(blue.Trainers, []string{"trainer-blue"}) {
		t.Errorf("blue: servers %v trainers %v", blue.Servers, blue.Trainers)
	}
	// A mapping's sample stream defaults to its policy's name.
	if len(red.Uses) != 1 || red.Uses[0].Feed != (feed{"sample", "red"}) || red.Uses[0].Field != "workers.actor.config.agents.0.policy" {
		t.Errorf("red uses %+v", red.Uses)
	}
}

func TestCheckPolicies(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		set   []string
		field string
		value any
		says  string
	}{
		{name: "no policy worker", yaml: twoPolicies, set: []string{"workers.policy-red.count=0"},
			field: "workers.actor.config.agents.0.policy", value: "red", says: "policy worker group serves (blue)"},
		{name: "no trainer", yaml: twoPolicies, set: []string{"workers.trainer-red.count=0"},
			field: "workers.actor.config.agents.0.policy", value: "red", says: "a trainer group trains (blue)"},
		{name: "trainer of a policy no actor uses", yaml: twoPolicies, set: []string{"workers.trainer-red.config.policy=green", "workers.policy-red.config.policy=green"},
			field: "workers.trainer-red.config.policy", value: "green", says: "some actor's agents use"},
		{name: "another policy's samples", yaml: twoPolicies, set: []string{"workers.actor.config.agents.1.sample_stream=red"},
			field: "workers.trainer-blue.config", value: "sample stream blue"},
		{name: "stream shared", yaml: twoPolicies, set: []string{"workers.trainer-red.config.sample_stream=blue"},
			field: "workers.trainer-red.config", value: "sample stream blue", says: "agents.1.policy (policy blue) send there too"},
		{name: "single policy, policy workers of another", yaml: minimal, set: []string{"workers.policy.config.policy=other"},
			field: "workers.actor.config.policy", value: "default", says: "(other)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parse(t, tt.yaml)
			for _, s := range tt.set {
				if err := c.Set(s); err != nil {
					t.Fatalf("Set(%q): %v", s, err)
				}
			}
			err := c.Validate(allTypes)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Validate = %v, want a *FieldError", err)
			}
			if fe.Field != tt.field || !reflect.DeepEqual(fe.Value, tt.value) {
				t.Errorf("FieldError = %v, want field %q value %#v", fe, tt.field, tt.value)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
		})
	}
}

// A pool's versions play in the actor: no policy worker serves them, and
// with the opponent's steps discarded no trainer trains them.
func TestCheckPoliciesPool(t *testing.T) {
	c := parse(t, `
name: t
workers:
  trainer: {count: 1, config: {policy: c4, sample_stream: c4}}
  policy: {count: 1, config: {policy: c4}}
  actor:
    count: 1
    config:
      env: connect4
      agents:
        - {match: player_0, policy: c4}
        - {match: player_1, policy: c4-pool, sample_stream: "null", pool: {policy: c4, last: 5}}
`)
	if err := c.Validate(allTypes); err != nil {
		t.Fatal(err)
	}
}

// An experiment without trainers acts with untrained policies (a sink's),
// and inline inference needs no policy worker.
func TestCheckPoliciesWithoutTrainers(t *testing.T) {
	c := parse(t, `
name: t
workers:
  sink: {count: 1}
  actor: {count: 1, config: {inference: inline}}
`)
	if err := c.Validate(allTypes); err != nil {
		t.Fatal(err)
	}
}
