package member

// The stats contract: the worker types the controller reasons about by
// name, and the keys of their "stats" replies that it reads for
// metrics.jsonl and the stop conditions. Both sides use these constants, so
// a renamed type or key fails to compile instead of silently leaving a
// figure out of a plot. A type's other keys are its own.
const (
	TypeActor   = "actor"
	TypePolicy  = "policy"
	TypeTrainer = "trainer"
	TypeSink    = "sink"
	TypeEcho    = "echo"
	TypeReplay  = "replay"
	TypeEval    = "evaluator"
)

// Keys of the "stats" reply read outside the worker type.
const (
	// StatEnvSteps (actor): environment steps taken; counts from zero in
	// each process.
	StatEnvSteps = "env_steps"
	// StatEpisodes (actor, trainer, sink): episodes that ended; counts
	// from zero in each process.
	StatEpisodes = "episodes"
	// StatMeanReturn (actor, trainer): mean return of the last
	// ReturnWindow episodes; the trainer leaves it out before the first.
	StatMeanReturn = "mean_return"
	// StatVersion (policy, trainer): the parameter version served or
	// trained.
	StatVersion = "version"
	// StatPolicyLag (trainer): mean versions between the parameters a
	// batch was collected with and the trainer's.
	StatPolicyLag = "policy_lag"
)

// Keys of the evaluator's "stats" reply read outside the worker type.
const (
	// StatEvalReturn (evaluator): the mean return of the version last
	// evaluated, StatEvalVersion that version.
	StatEvalReturn  = "eval_return"
	StatEvalVersion = "eval_version"
	// StatBestReturn (evaluator): the best mean return of a version it
	// evaluated, StatBestVersion that version.
	StatBestReturn  = "best_return"
	StatBestVersion = "best_version"
)

// ReturnWindow is how many recent episodes a mean return covers (the
// actors', the trainer's and the sink's), and so how many must have ended
// before a target return can stop a trial.
const ReturnWindow = 20
