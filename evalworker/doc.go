// Package evalworker is the "evaluator" worker type: it plays each kept
// version of a policy (paramstream.Versions) carrying a tag for a number of
// episodes of its own environment, greedily unless told otherwise, and
// records the mean return and its standard error in the version's metadata
// (eval_return, eval_stderr, eval_episodes, eval_ms), in its stats (and so
// in metrics.jsonl, on the dashboard and in Prometheus), and moves a tag
// ("best") to the best version it has evaluated.
//
// Versions are evaluated oldest first, one at a time, a bounded number of
// environment steps per poll, so the worker answers requests throughout.
// A version whose metadata already holds an evaluation is not evaluated
// again: a restarted evaluator (or a trial resumed) goes on where it was.
// The return is written last, so its presence means the whole evaluation
// is there.
// A version collected while it is evaluated is dropped.
//
// Configure kwargs:
//
//	env, env_config       the environment (required: env)
//	policy                the policy whose versions it evaluates ("default")
//	tag                   evaluate the versions carrying this tag ("pool")
//	episodes              episodes per version (20)
//	deterministic         greedy actions (true)
//	best_tag              the tag moved to the best version ("best"; "": none)
//	hidden, activation, conv, shared_trunk
//	                      the network, as the trainer's
//	steps_per_poll        environment steps between requests (256)
//	seed                  seeds the episodes (the worker's index)
//	label                 names the evaluation in the metadata: eval_{label}_return, ...
//	                      (several evaluators of one policy, against different opponents)
//	opponent              {policy, identifier, agents}: a kept version of a policy (default:
//	                      the evaluated one) plays the agents at agents ([1]) of a game such
//	                      as connect4, the version evaluated the others; identifier (required)
//	                      is a tag such as best, or a version number, looked up again at the
//	                      start of each evaluation (which waits until it exists); the
//	                      opponent's version is recorded as eval_[label_]opponent
//
// Besides the mean return and its standard error an evaluation records
// the win rate, the share of episodes whose return is positive: against a
// built-in opponent of a game (connect4's env_config {opponent: ...}), the
// games won.
//
// Every agent of the environment plays the version, but an opponent's; a
// multi-agent environment's return is the first agent's the version plays
// (the team's, for a shared reward such as simple_spread's).
package evalworker
