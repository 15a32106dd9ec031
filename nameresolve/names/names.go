package names

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultRoot is the first key segment of every record distrl writes.
const DefaultRoot = "distrl"

// Trial is the key space of one trial of one experiment.
type Trial struct {
	Root       string
	Experiment string
	Trial      string
}

// NewTrial returns the key space of experiment/trial under DefaultRoot.
func NewTrial(experiment, trial string) Trial {
	return Trial{Root: DefaultRoot, Experiment: experiment, Trial: trial}
}

// Prefix is the subtree holding every record of the trial, with a trailing slash.
func (t Trial) Prefix() string {
	root := t.Root
	if root == "" {
		root = DefaultRoot
	}
	return root + "/" + t.Experiment + "/" + t.Trial + "/"
}

// WorkerPrefix is the subtree of worker address records.
func (t Trial) WorkerPrefix() string { return t.Prefix() + "worker/" }

// Worker is the key of a worker's address record.
func (t Trial) Worker(name string) string { return t.WorkerPrefix() + name }

// StatusPrefix is the subtree of worker status records.
func (t Trial) StatusPrefix() string { return t.Prefix() + "status/" }

// Status is the key of a worker's status record.
func (t Trial) Status(name string) string { return t.StatusPrefix() + name }

// LoopPrefix is the subtree of loop records: the heartbeat of each worker
// loop, which all the workers one process hosts share.
func (t Trial) LoopPrefix() string { return t.Prefix() + "loop/" }

// Loop is the key of a loop record; a loop is named after its first worker.
func (t Trial) Loop(name string) string { return t.LoopPrefix() + name }

// StreamPrefix is the subtree of the endpoints of one stream.
func (t Trial) StreamPrefix(kind, name string) string {
	return t.Prefix() + "stream/" + kind + "/" + name + "/"
}

// Stream is the key of endpoint index of a stream.
func (t Trial) Stream(kind, name string, index int) string {
	return t.StreamPrefix(kind, name) + strconv.Itoa(index)
}

// GroupPrefix is the subtree of the member records of one collective group
// (package collective): a data-parallel trainer group, say.
func (t Trial) GroupPrefix(group string) string { return t.Prefix() + "group/" + group + "/" }

// Group is the key of the record of member rank of a collective group.
func (t Trial) Group(group string, rank int) string {
	return t.GroupPrefix(group) + strconv.Itoa(rank)
}

// Params is the key of the newest parameter version of a policy.
func (t Trial) Params(policy string) string { return t.Prefix() + "params/" + policy }

// VersionsPrefix is the subtree of every policy's kept parameter versions
// (package paramstream's Versions).
func (t Trial) VersionsPrefix() string { return t.Prefix() + "versions/" }

// Versions is the subtree of one policy's kept parameter versions: a
// record per version, and its tags and metadata below it.
func (t Trial) Versions(policy string) string { return t.VersionsPrefix() + policy + "/" }

// WorkerName is "{type}/{index}".
func WorkerName(workerType string, index int) string {
	return workerType + "/" + strconv.Itoa(index)
}

// ParseWorkerName splits "{type}/{index}". A bare name ("ctl") has index -1.
func ParseWorkerName(name string) (workerType string, index int, err error) {
	typ, idx, found := strings.Cut(name, "/")
	if typ == "" {
		return "", 0, fmt.Errorf("names: empty worker type in %q", name)
	}
	if !found {
		return typ, -1, nil
	}
	i, err := strconv.Atoi(idx)
	if err != nil || i < 0 {
		return "", 0, fmt.Errorf("names: worker name %q: index %q is not a non-negative integer", name, idx)
	}
	return typ, i, nil
}
