// Package slurm is the controller's cluster scheduler: every worker group
// of a trial is a SLURM job array (an sbatch script per group in the trial
// directory's slurm/, whose task i runs `rlctl worker --type T --index i`,
// or hosts per_process workers), each task a controller.Handle tracked
// through squeue. It implements controller.GroupScheduler; the controller
// never names it (cmd/rlctl picks it for --scheduler slurm), as Nomad
// keeps its task drivers apart from its core. docs/cluster.md has the
// scripts and what the nodes need.
package slurm
