// Package slurmtest gives a test binary one real multi-node SLURM cluster
// (scripts/slurmcluster.sh: a slurmd per network namespace, slurmctld and
// munged on the host side of a bridge), brought up by the first test that
// needs it and torn down by TestMain. Tests that need it skip with the
// reason on machines that cannot run it (not root, no nsenter or ip) and
// under -short.
package slurmtest
