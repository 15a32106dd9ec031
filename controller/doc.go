// Package controller runs one trial of an experiment: it starts the
// workers through a Scheduler, configures and starts them in the
// experiment's start order, monitors them (restarting a worker that is
// lost, fails or exits, up to the configured number of times), polls their
// statistics into metrics.jsonl and a progress line, and stops everything
// when a stop condition holds or its context is cancelled.
//
// One trial lives in one directory (see TrialDir):
//
//	{workdir}/{experiment}/{trial}/
//	    config.yaml       the configuration as run, after --set overrides
//	    controller.json   the controller's pid, state, name server and worker pids
//	    metrics.jsonl     one JSON object per metrics interval
//	    plot.png          written by `rlctl plot`
//	    logs/{type}-{index}.log
//	    checkpoints/      handed to trainers as checkpoint_dir
//	    etcd/             the embedded etcd's data, when the controller runs one
//
// The controller is itself a member of the trial: it serves ping, status,
// stats (the newest metrics), interrupt and exit as the worker named "ctl",
// so `rlctl ls` shows it and `rlctl request ctl interrupt` stops the trial
// from anywhere the name server is reachable.
//
// Run returns a Result whose Outcome is Completed, Interrupted or Failed;
// a Failed run also returns an error, typed where a caller may act on it
// (*WorkersAliveError, *RegisterError, *ConfigureError, *WorkerFailedError).
package controller
