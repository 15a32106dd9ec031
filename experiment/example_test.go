package experiment_test

import (
	"fmt"

	"github.com/distrl/distrl/experiment"
)

// Parse an experiment, override it as `rlctl start --set` does, validate it
// against the worker types this program can start, and resolve count: auto
// for a 16-core machine.
func ExampleParse() {
	cfg, err := experiment.Parse([]byte(`
name: demo
workers:
  actor: {count: 2, config: {env: CartPole-v1, ring_size: 8, log: "/tmp/actor-{index}.log"}}
  policy: {count: auto, config: {env: CartPole-v1}}
  sink: {count: 1}
stop: {env_steps: 100000}
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, set := range []string{"workers.actor.count=14", "workers.actor.config.ring_size=64"} {
		if err := cfg.Set(set); err != nil {
			fmt.Println(err)
			return
		}
	}
	if err := cfg.Validate([]string{"actor", "policy", "sink"}); err != nil {
		fmt.Println(err)
		return
	}
	cfg.ResolveCounts(16)
	for _, typ := range cfg.Groups() {
		fmt.Println(typ, cfg.Workers[typ].Count)
	}
	kw := cfg.WorkerConfig("actor", 3)
	fmt.Println(kw["ring_size"], kw["log"], kw["seed"])

	// A misspelt key is refused, naming it; the configuration is unchanged.
	fmt.Println(cfg.Set("stop.env_stepz=5"))
	// Output:
	// policy 4
	// sink 1
	// actor 14
	// 64 /tmp/actor-3.log 3
	// stop.env_stepz: 5: want no such field: a known one (docs/experiments.md has the schema)
}
