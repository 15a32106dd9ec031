package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Files of a trial directory.
const (
	ConfigFile     = "config.yaml"
	RecordFile     = "controller.json"
	MetricsFile    = "metrics.jsonl"
	PlotFile       = "plot.png"
	LogsDir        = "logs"
	CheckpointsDir = "checkpoints"
	EtcdDir        = "etcd"
	// VersionsFile holds the trial's kept versions' records at the end of
	// a run, for a run of the trial on a fresh name server (an embedded
	// etcd) to restore.
	VersionsFile = "versions.json"
)

// DefaultWorkdir is where trial directories go: ~/.distrl/trials.
func DefaultWorkdir() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("controller: no home directory for the default workdir: %w", err)
	}
	return filepath.Join(home, ".distrl", "trials"), nil
}

// TrialDir is the directory of one trial: {workdir}/{experiment}/{trial}.
type TrialDir string

// NewTrialDir returns the directory of experiment/trial under workdir.
func NewTrialDir(workdir, experiment, trial string) TrialDir {
	return TrialDir(filepath.Join(workdir, experiment, trial))
}

func (d TrialDir) Path(elem ...string) string {
	return filepath.Join(append([]string{string(d)}, elem...)...)
}

// Log is the log file of a worker: logs/{type}-{index}.log.
func (d TrialDir) Log(workerName string) string {
	return d.Path(LogsDir, strings.ReplaceAll(workerName, "/", "-")+".log")
}

// States of a controller in its record.
const (
	StateStarting    = "starting"
	StateRunning     = "running"
	StateStopping    = "stopping"
	StateCompleted   = "completed"
	StateInterrupted = "interrupted"
	StateFailed      = "failed"
)

// Record is controller.json: who runs the trial and where to reach it.
type Record struct {
	PID        int    `json:"pid"`
	Host       string `json:"host"`
	Experiment string `json:"experiment"`
	Trial      string `json:"trial"`
	Scheduler  string `json:"scheduler"`
	State      string `json:"state"`
	// Message says why the trial ended, once it has.
	Message string     `json:"message,omitempty"`
	Started time.Time  `json:"started"`
	Ended   *time.Time `json:"ended,omitempty"`
	// NameResolve is the etcd endpoint the workers use; EmbeddedEtcd says
	// the controller runs it (it is gone once the controller is).
	NameResolve  string `json:"nameresolve"`
	EmbeddedEtcd bool   `json:"embedded_etcd"`
	// Workers maps worker names to the pids of their current processes.
	Workers map[string]int `json:"workers,omitempty"`
	// Restarts counts, by worker name, the restarts of the process that
	// runs it (every worker a process hosts counts its restart): the
	// dashboard's per-worker figure, which metrics.jsonl does not carry.
	Restarts map[string]int `json:"restarts,omitempty"`
}

// Active reports whether the record says a controller is at work.
func (r *Record) Active() bool {
	switch r.State {
	case StateStarting, StateRunning, StateStopping:
		return true
	}
	return false
}

// Alive reports whether the controller of an active record is still a
// live process on this host. (A pid can be reused after a reboot; the
// state check keeps that case to a controller that crashed mid-run.)
func (r *Record) Alive() bool {
	host, _ := os.Hostname()
	return r.Active() && r.Host == host && ProcessAlive(r.PID)
}

// ProcessAlive reports whether pid is a live process (not a zombie).
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	// A zombie answers signal 0 but is dead: read its state where /proc exists.
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return !errors.Is(err, os.ErrNotExist) || !dirExists("/proc/self")
	}
	// The state follows the command name, which is in parentheses.
	if i := strings.LastIndexByte(string(stat), ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

func dirExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// ReadRecord reads the trial's controller.json.
func (d TrialDir) ReadRecord() (*Record, error) {
	b, err := os.ReadFile(d.Path(RecordFile))
	if err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	var r Record
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("controller: %s: %w", d.Path(RecordFile), err)
	}
	return &r, nil
}

// writeRecord replaces controller.json atomically, so a reader never sees
// half a file.
func (d TrialDir) writeRecord(r *Record) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	tmp := d.Path(RecordFile + ".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	if err := os.Rename(tmp, d.Path(RecordFile)); err != nil {
		return fmt.Errorf("controller: %w", err)
	}
	return nil
}
