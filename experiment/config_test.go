package experiment

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

var allTypes = []string{"actor", "echo", "evaluator", "policy", "replay", "sink", "trainer"}

const minimal = `
name: t
workers:
  actor: {count: 2, config: {env: CartPole-v1, ring_size: 8, path: "/d/{index}"}}
  policy: {count: 1}
stop: {env_steps: 100}
`

func parse(t *testing.T, y string) *Config {
	t.Helper()
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return c
}

func TestBuiltinsValidate(t *testing.T) {
	names := Names()
	for _, want := range []string{"cartpole-apex", "cartpole-ppo", "cartpole-sink", "echo-64", "pycartpole-ppo", "pyspread-ppo", "spread-ppo", "spread-sink", "spread-teams-ppo", "connect4-selfplay-ppo",
		// One per MinAtar game, and both algorithms on Breakout and Seaquest: the
		// learning-curve benchmark (e2e, make bench-minatar) runs them by name.
		"minatar-asterix-ppo", "minatar-breakout-apex", "minatar-breakout-ppo", "minatar-freeway-apex", "minatar-seaquest-apex", "minatar-seaquest-ppo", "minatar-space_invaders-ppo"} {
		if _, err := Builtin(want); err != nil {
			t.Errorf("Builtin(%q): %v (names %v)", want, err, names)
		}
	}
	for _, name := range names {
		c, err := Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(allTypes); err != nil {
			t.Errorf("%s: %v", name, err)
		}
		if c.Name != name {
			t.Errorf("%s: name field is %q", name, c.Name)
		}
		if c.Description == "" {
			t.Errorf("%s: no description", name)
		}
	}
	// Until the trainer type registers, cartpole-ppo names it as unknown.
	c, _ := Builtin("cartpole-ppo")
	var fe *FieldError
	if err := c.Validate([]string{"actor", "policy"}); !errors.As(err, &fe) || fe.Field != "workers.trainer" {
		t.Errorf("cartpole-ppo without trainer: %v", err)
	}
	if _, err := Builtin("nope"); !errors.Is(err, ErrUnknownExperiment) {
		t.Errorf("Builtin(nope) = %v, want ErrUnknownExperiment", err)
	}
}

func TestValidateErrors(t *testing.T) {
	tests := []struct {
		name  string
		set   []string // applied to minimal
		yaml  string   // instead of minimal when set
		field string   // of the first FieldError
		value any
	}{
		{name: "unknown type", set: []string{"workers.bogus.count=1"}, field: "workers.bogus", value: "bogus"},
		{name: "negative count", set: []string{"workers.actor.count=-1"}, field: "workers.actor.count", value: -1},
		{name: "negative per process", set: []string{"workers.actor.per_process=-4"}, field: "workers.actor.per_process", value: -4},
		{name: "bad wall time", set: []string{"stop.wall_time=ten minutes"}, field: "stop.wall_time", value: "ten minutes"},
		{name: "negative wall time", set: []string{"stop.wall_time=-1s"}, field: "stop.wall_time", value: "-1s"},
		{name: "bad metrics interval", set: []string{"metrics_interval=1ms"}, field: "metrics_interval", value: "1ms"},
		{name: "negative env steps", set: []string{"stop.env_steps=-5"}, field: "stop.env_steps", value: int64(-5)},
		{name: "negative restarts", set: []string{"stop.max_restarts=-1"}, field: "stop.max_restarts", value: -1},
		{name: "bad memory", set: []string{"workers.actor.resources.memory=lots"}, field: "workers.actor.resources.memory", value: "lots"},
		{name: "negative cpus", set: []string{"workers.actor.resources.cpus=-2"}, field: "workers.actor.resources.cpus", value: -2.0},
		{name: "bad name", set: []string{"name=a/b"}, field: "name", value: "a/b"},
		{name: "no workers", set: []string{"workers.actor.count=0", "workers.policy.count=0"}, field: "workers", value: "0 workers"},
		{name: "start order unknown", set: []string{"start_order=[policy, bogus]"}, field: "start_order[1]", value: "bogus"},
		{name: "start order twice", set: []string{"start_order=[policy, policy]"}, field: "start_order[1]", value: "policy"},
		{name: "bad stream", set: []string{"streams.sample=[\"a b\"]"}, field: "streams.sample[0]", value: "a b"},
		{name: "group of unknown type", set: []string{"workers.red.count=1", "workers.red.type=bogus"}, field: "workers.red.type", value: "bogus"},
		{name: "named group without type", set: []string{"workers.red.count=1"}, field: "workers.red", value: "red"},
		{name: "bad group name", set: []string{"workers.a b.count=1", "workers.a b.type=actor"}, field: "workers.a b", value: "a b"},
		{name: "auto for actors by type", set: []string{"workers.red.count=auto", "workers.red.type=actor"}, field: "workers.red.count", value: "auto"},
		{name: "colocate with no such group", set: []string{"workers.policy.colocate=actors"}, field: "workers.policy.colocate", value: "actors"},
		{name: "colocate with itself", set: []string{"workers.policy.colocate=policy"}, field: "workers.policy.colocate", value: "policy"},
		{name: "colocate count", set: []string{"workers.policy.colocate=actor"}, field: "workers.policy.count", value: 1},
		{name: "colocate per process", set: []string{"workers.policy.colocate=actor", "workers.policy.count=2", "workers.policy.per_process=2"}, field: "workers.policy.per_process", value: 2},
		{name: "colocate with hosts", set: []string{"workers.policy.colocate=actor", "workers.policy.count=2", "workers.actor.per_process=2"}, field: "workers.actor.per_process", value: 2},
		{name: "colocate chain", set: []string{"workers.policy.colocate=actor", "workers.policy.count=2", "workers.sink.count=2", "workers.sink.colocate=policy"}, field: "workers.sink.colocate", value: "policy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := parse(t, minimal)
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
			if fe.Field != tt.field || !reflect.DeepEqual(fe.Value, tt.value) || fe.Allowed == "" {
				t.Errorf("FieldError = %#v, want field %q value %#v", fe, tt.field, tt.value)
			}
			if !strings.Contains(err.Error(), tt.field) {
				t.Errorf("message %q does not name %s", err, tt.field)
			}
		})
	}
}

func TestValidateReportsEveryField(t *testing.T) {
	c := parse(t, minimal)
	for _, s := range []string{"workers.actor.count=-1", "stop.wall_time=soon"} {
		if err := c.Set(s); err != nil {
			t.Fatal(err)
		}
	}
	err := c.Validate(allTypes)
	for _, f := range []string{"workers.actor.count", "stop.wall_time"} {
		if err == nil || !strings.Contains(err.Error(), f) {
			t.Errorf("error %v does not name %s", err, f)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := []struct {
		name, yaml, field string
	}{
		{"unknown top-level key", "name: x\nworkerz: {}\n", "workerz"},
		{"unknown stop key", "name: x\nstop: {env_stepz: 1}\n", "stop.env_stepz"},
		{"unknown group key", "name: x\nworkers: {actor: {cont: 1}}\n", "workers.actor.cont"},
		{"count is a string", "name: x\nworkers: {actor: {count: many}}\n", "workers.actor.count"},
		{"duration is a number", "name: x\nstop: {wall_time: 10}\n", "stop.wall_time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.yaml))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Parse = %v, want a *FieldError on %s", err, tt.field)
			}
		})
	}
	if _, err := Parse([]byte("name: [unclosed")); err == nil {
		t.Error("Parse of bad YAML succeeded")
	}
}

func TestSet(t *testing.T) {
	tests := []struct {
		set   string
		check func(*Config) bool
	}{
		{"workers.actor.count=4", func(c *Config) bool { return c.Workers["actor"].Count == 4 }},
		{"workers.actor.config.ring_size=16", func(c *Config) bool { return c.Workers["actor"].Config["ring_size"] == int64(16) }},
		{"workers.actor.config.lr=2.5e-4", func(c *Config) bool { return c.Workers["actor"].Config["lr"] == 2.5e-4 }},
		{"workers.actor.config.deterministic=true", func(c *Config) bool { return c.Workers["actor"].Config["deterministic"] == true }},
		{"workers.actor.config.hidden=[32, 32]", func(c *Config) bool {
			return reflect.DeepEqual(c.Workers["actor"].Config["hidden"], []any{int64(32), int64(32)})
		}},
		{"workers.sink.count=1", func(c *Config) bool { return c.Workers["sink"].Count == 1 }},
		{"workers.policy.count=auto", func(c *Config) bool {
			if c.Workers["policy"].Count != Auto {
				return false
			}
			c.ResolveCounts(runtime.NumCPU())
			return c.Workers["policy"].N() == AutoPolicyWorkers(runtime.NumCPU(), 2)
		}},
		{"workers.actor.per_process=256", func(c *Config) bool { return c.Workers["actor"].WorkersPerProcess() == 256 }},
		{"workers.policy.config.env=CartPole-v1", func(c *Config) bool { return c.Workers["policy"].Config["env"] == "CartPole-v1" }},
		{"stop.wall_time=90s", func(c *Config) bool { return c.Stop.WallTimeLimit() == 90*time.Second }},
		{"stop.target_return=475", func(c *Config) bool { return c.Stop.TargetReturn != nil && *c.Stop.TargetReturn == 475 }},
		{"stop.max_restarts=0", func(c *Config) bool { return c.Stop.Restarts() == 0 }},
		{"metrics_interval=500ms", func(c *Config) bool { return c.MetricsEvery() == 500*time.Millisecond }},
		{"start_order=[actor, policy]", func(c *Config) bool { return reflect.DeepEqual(c.Groups(), []string{"actor", "policy"}) }},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			c := parse(t, minimal)
			if err := c.Set(tt.set); err != nil {
				t.Fatalf("Set: %v", err)
			}
			if !tt.check(c) {
				t.Errorf("after Set(%q): %+v", tt.set, c)
			}
			if err := c.Validate(allTypes); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

func TestSetErrors(t *testing.T) {
	tests := []struct{ set, field string }{
		{"no-equals", "--set"},
		{"stop.bogus=1", "stop.bogus"},
		{"workers.actor.count=many", "workers.actor.count"},
		{"name.x=1", "name"},
	}
	for _, tt := range tests {
		t.Run(tt.set, func(t *testing.T) {
			c := parse(t, minimal)
			before, _ := c.YAML()
			err := c.Set(tt.set)
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("Set = %v, want a *FieldError on %s", err, tt.field)
			}
			if after, _ := c.YAML(); string(after) != string(before) {
				t.Errorf("failed Set changed the config:\n%s\n->\n%s", before, after)
			}
		})
	}
}

func TestDefaultsAndOrder(t *testing.T) {
	c := parse(t, minimal+"  # comment\n")
	c.Workers["zeta"] = Group{Count: 1}
	c.Workers["trainer"] = Group{Count: 1}
	if got, want := c.Groups(), []string{"trainer", "policy", "actor", "zeta"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Types() = %v, want %v", got, want)
	}
	if c.MetricsEvery() != DefaultMetricsInterval || c.Stop.Restarts() != DefaultMaxRestarts || c.Stop.WallTimeLimit() != 0 {
		t.Errorf("defaults: %v %v %v", c.MetricsEvery(), c.Stop.Restarts(), c.Stop.WallTimeLimit())
	}
}

func TestWorkerConfig(t *testing.T) {
	c := parse(t, minimal+"seed: 100\n")
	got := c.WorkerConfig("actor", 1)
	want := map[string]any{"env": "CartPole-v1", "ring_size": int64(8), "path": "/d/1", "seed": int64(101)}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("WorkerConfig = %#v, want %#v", got, want)
	}
	if c.Workers["actor"].Config["path"] != "/d/{index}" {
		t.Error("WorkerConfig changed the group's config")
	}
	if err := c.Set("workers.actor.config.seed=7"); err != nil {
		t.Fatal(err)
	}
	if got := c.WorkerConfig("actor", 3)["seed"]; got != int64(10) {
		t.Errorf("seed with the group's own seed 7, index 3 = %v, want 10", got)
	}
}

func TestLoadAndSnapshotRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.yaml")
	if err := os.WriteFile(path, []byte(minimal), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := c.YAML()
	if err != nil {
		t.Fatal(err)
	}
	again, err := Parse(snap)
	if err != nil {
		t.Fatalf("snapshot does not parse: %v\n%s", err, snap)
	}
	if !reflect.DeepEqual(c, again) {
		t.Errorf("round trip:\n%#v\n%#v", c, again)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Load(missing) = %v", err)
	}
}

func TestParseQuantity(t *testing.T) {
	tests := []struct {
		in   string
		want int64
		ok   bool
	}{
		{"512Mi", 512 << 20, true}, {"2Gi", 2 << 30, true}, {"1G", 1e9, true}, {"1.5Ki", 1536, true},
		{"1048576", 1 << 20, true}, {"", 0, false}, {"Mi", 0, false}, {"-1Gi", 0, false}, {"lots", 0, false}, {"NaN", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseQuantity(tt.in)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseQuantity(%q) = %d, %v; want %d ok=%v", tt.in, got, err, tt.want, tt.ok)
		}
	}
}

func TestAutoPolicyWorkers(t *testing.T) {
	for _, tc := range []struct{ cores, actors, want int }{
		{1, 2, 1}, {2, 2, 1}, {4, 2, 1}, {8, 2, 2}, {16, 2, 2}, {16, 14, 4}, {16, 1, 1},
		{16, 0, 1}, {64, 14, 14}, {64, -1, 16}, {3, -1, 1},
	} {
		if got := AutoPolicyWorkers(tc.cores, tc.actors); got != tc.want {
			t.Errorf("AutoPolicyWorkers(%d cores, %d actors) = %d, want %d", tc.cores, tc.actors, got, tc.want)
		}
	}
	// In a document, auto stays auto through --set (the actor count may
	// change after it) until ResolveCounts, then the number for the cores
	// and the actors, in the snapshot too.
	c := parse(t, `
name: t
workers:
  actor: {count: 2, config: {env: CartPole-v1}}
  policy: {count: auto, config: {env: CartPole-v1}}
stop: {env_steps: 100}
`)
	if err := c.Set("workers.actor.count=14"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(allTypes); err != nil {
		t.Fatal(err)
	}
	if c.Workers["policy"].Count != Auto {
		t.Fatalf("policy count %v before ResolveCounts, want auto", c.Workers["policy"].Count)
	}
	c.ResolveCounts(16)
	if n := c.Workers["policy"].N(); n != 4 {
		t.Errorf("policy count %d on 16 cores with 14 actors, want 4", n)
	}
	if y, _ := c.YAML(); !strings.Contains(string(y), "count: 4") {
		t.Errorf("snapshot:\n%s", y)
	}
	err := parse(t, "name: t\nworkers:\n  trainer: {count: auto}\n").Validate(allTypes)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "workers.trainer.count" || !strings.Contains(fe.Allowed, "auto is for policy and sink groups") {
		t.Errorf("auto trainer count: %v, want a FieldError on workers.trainer.count", err)
	}
}

func TestAutoSinks(t *testing.T) {
	for _, tc := range []struct{ actors, want int }{
		{-1, 1}, {0, 1}, {1, 1}, {2, 1}, {4, 1}, {5, 2}, {8, 2}, {14, 4}, {64, 16},
	} {
		if got := AutoSinks(tc.actors); got != tc.want {
			t.Errorf("AutoSinks(%d actors) = %d, want %d", tc.actors, got, tc.want)
		}
	}
	// A sink group of count: auto follows the actors, --set included; a
	// group of another name whose type is sink too; a policy group's auto
	// stays the policy rule.
	c := parse(t, `
name: t
workers:
  actor: {count: 2, config: {env: CartPole-v1}}
  policy: {count: auto, config: {env: CartPole-v1}}
  sink: {count: auto}
  tap: {type: sink, count: auto, config: {stream: other}}
stop: {env_steps: 100}
`)
	if err := c.Set("workers.actor.count=14"); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(allTypes); err != nil {
		t.Fatal(err)
	}
	c.ResolveCounts(16)
	for group, want := range map[string]int{"sink": 4, "tap": 4, "policy": 4, "actor": 14} {
		if n := c.Workers[group].N(); n != want {
			t.Errorf("%s count %d with 14 actors on 16 cores, want %d", group, n, want)
		}
	}
}

// A number in a --set path indexes a list: an element is replaced, or a
// key set inside it; an index off the list, or a key into a list, is a
// *FieldError naming the path so far.
func TestSetListIndex(t *testing.T) {
	c := parse(t, minimal)
	for _, s := range []string{
		"workers.actor.config.tables=[{name: a, max_size: 10}, {name: b}]",
		"workers.actor.config.tables.1.max_size=200000",
		"workers.actor.config.hidden=[32, 32]",
		"workers.actor.config.hidden.0=64",
	} {
		if err := c.Set(s); err != nil {
			t.Fatalf("Set(%q): %v", s, err)
		}
	}
	want := []any{map[string]any{"name": "a", "max_size": int64(10)}, map[string]any{"name": "b", "max_size": int64(200000)}}
	if got := c.Workers["actor"].Config["tables"]; !reflect.DeepEqual(got, want) {
		t.Errorf("tables = %#v, want %#v", got, want)
	}
	if got := c.Workers["actor"].Config["hidden"]; !reflect.DeepEqual(got, []any{int64(64), int64(32)}) {
		t.Errorf("hidden = %#v", got)
	}
	for _, tt := range []struct{ set, field string }{
		{"workers.actor.config.hidden.2=1", "workers.actor.config.hidden.2"},
		{"workers.actor.config.hidden.-1=1", "workers.actor.config.hidden.-1"},
		{"workers.actor.config.tables.x=1", "workers.actor.config.tables.x"},
		{"workers.actor.config.hidden.0.x=1", "workers.actor.config.hidden.0"},
	} {
		var fe *FieldError
		if err := c.Set(tt.set); !errors.As(err, &fe) || fe.Field != tt.field {
			t.Errorf("Set(%q) = %v, want a *FieldError on %s", tt.set, err, tt.field)
		}
	}
}

func TestNamedGroups(t *testing.T) {
	c := parse(t, `
name: t
workers:
  trainer-red: {type: trainer, count: 1}
  trainer-blue: {type: trainer, count: 1}
  policy-red: {type: policy, count: auto}
  policy: {count: 1}
  actor: {count: 3}
  actors-b: {type: actor, count: 2}
`)
	if err := c.Validate(allTypes); err != nil {
		t.Fatal(err)
	}
	if got, want := c.TypeOf("policy-red"), "policy"; got != want {
		t.Errorf("TypeOf(policy-red) = %q, want %q", got, want)
	}
	if got, want := c.TypeOf("actor"), "actor"; got != want {
		t.Errorf("TypeOf(actor) = %q, want %q", got, want)
	}
	if got, want := c.GroupsOf("trainer"), []string{"trainer-blue", "trainer-red"}; !reflect.DeepEqual(got, want) {
		t.Errorf("GroupsOf(trainer) = %v, want %v", got, want)
	}
	// Types in DefaultStartOrder, each type's groups by name.
	if got, want := c.Groups(), []string{"trainer-blue", "trainer-red", "policy", "policy-red", "actor", "actors-b"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Groups() = %v, want %v", got, want)
	}
	// A start order may name a group or a type.
	c.StartOrder = []string{"policy-red", "trainer", "actor"}
	if got, want := c.Groups(), []string{"policy-red", "trainer-blue", "trainer-red", "actor", "actors-b", "policy"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Groups() with start_order = %v, want %v", got, want)
	}
	// auto counts the actors of every actor group: 5 actors, 32 cores.
	c.ResolveCounts(32)
	if got := c.Workers["policy-red"].Count; got != 5 {
		t.Errorf("policy-red count auto = %v, want 5 (one per actor)", got)
	}
}

// A colocated group runs no processes of its own; count: auto is its
// host's count, whatever the cores; Colocated lists it under its host.
func TestColocate(t *testing.T) {
	c := parse(t, `
name: t
workers:
  actor: {count: 3, config: {env: CartPole-v1}}
  policy: {count: auto, colocate: actor, config: {env: CartPole-v1}}
  sink: {count: 1}
stop: {env_steps: 100}
`)
	if err := c.Validate(allTypes); err != nil {
		t.Fatal(err)
	}
	c.ResolveCounts(64)
	if n := c.Workers["policy"].N(); n != 3 {
		t.Errorf("colocated policy count %d with 3 actors on 64 cores, want 3", n)
	}
	for group, want := range map[string]int{"actor": 3, "policy": 0, "sink": 1} {
		if got := c.Workers[group].Processes(); got != want {
			t.Errorf("%s runs %d processes, want %d", group, got, want)
		}
	}
	if got := c.Colocated("actor"); !slices.Equal(got, []string{"policy"}) {
		t.Errorf("Colocated(actor) = %v", got)
	}
	if got := c.Colocated("sink"); len(got) != 0 {
		t.Errorf("Colocated(sink) = %v", got)
	}
}
