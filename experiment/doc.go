// Package experiment is the configuration of a distrl experiment: which
// worker types run and how many of each, what each is configured with, in
// which order they start, and when the trial stops.
//
// A configuration is YAML (or JSON) decoded strictly into [Config]: an
// unknown key is an error rather than a silently ignored typo.
//
//	name: cartpole-sink
//	workers:
//	  policy: {count: 1, config: {env: CartPole-v1}}
//	  actor:
//	    count: 2
//	    resources: {cpus: 1, memory: 512Mi}
//	    config: {env: CartPole-v1, ring_size: 8}
//	  sink: {count: 1}
//	stop: {env_steps: 200000, wall_time: 10m}
//
// [Load] reads a file, [Builtin] returns one of the experiments shipped in
// the binary ([Names] lists them), [Config.Set] applies a `--set key=value`
// override and [Config.Validate] checks the result, reporting each bad
// field as a [*FieldError]. The package knows nothing about processes or
// name resolve: package controller runs a validated Config.
package experiment
