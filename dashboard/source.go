package dashboard

import (
	"context"
	"errors"
	"time"

	"github.com/distrl/distrl/worker/member"
)

// ErrUnknownWorker: a log was asked for a name that is not one of the
// trial's workers.
var ErrUnknownWorker = errors.New("dashboard: not a worker of the trial")

// Source is what a dashboard shows. Its methods are called concurrently.
type Source interface {
	// Names are the experiment and trial shown.
	Names() (experiment, trial string)
	// Snapshot is the trial now: its controller, configuration, workers.
	// With stats it also asks every live worker for its figures (the
	// table's steps/s, batch sizes, versions); without, it asks no worker
	// anything: what /sd and /metrics need, so that Prometheus's refreshes
	// and scrapes cost the workers nothing.
	Snapshot(ctx context.Context, stats bool) (*Snapshot, error)
	// History returns the metrics points from index since on (at most
	// limit of them).
	History(ctx context.Context, since, limit int) (History, error)
	// LogTail returns up to max bytes from the end of worker's log, from a
	// line start; ErrUnknownWorker for a name not among the trial's
	// workers.
	LogTail(ctx context.Context, worker string, max int) ([]byte, error)
}

// Snapshot is the trial at one moment: the reply of /api/trial.
type Snapshot struct {
	Experiment string     `json:"experiment"`
	Trial      string     `json:"trial"`
	Controller Controller `json:"controller"`
	// Config is the text of the trial's config.yaml.
	Config  string   `json:"config"`
	Workers []Worker `json:"workers"`
	// Last is the newest metrics point; nil before the first.
	Last *Point `json:"last,omitempty"`
	// Problem says what could not be read (the name server, say); the
	// rest is what could.
	Problem string    `json:"problem,omitempty"`
	Time    time.Time `json:"time"`
	// Statuses are the workers' records as the panel combined them: the
	// service discovery document is built from them.
	Statuses []member.Status `json:"-"`
}

// Controller is the trial's controller as its record says.
type Controller struct {
	State   string     `json:"state"`
	PID     int        `json:"pid,omitempty"`
	Host    string     `json:"host,omitempty"`
	Started *time.Time `json:"started,omitempty"`
	Ended   *time.Time `json:"ended,omitempty"`
	Message string     `json:"message,omitempty"`
	// Restarts is the trial's total.
	Restarts int `json:"restarts"`
}

// Worker is one row of the workers table.
type Worker struct {
	Name  string `json:"name"`
	Type  string `json:"type"`
	Index int    `json:"index"`
	Host  string `json:"host,omitempty"`
	PID   int    `json:"pid,omitempty"`
	// State is the lifecycle state, HUNG and LOST included; UNKNOWN when
	// the worker has no records (yet).
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	// StepsPerS is the worker's throughput in env steps: taken (actor),
	// inferred (policy), trained on (trainer); absent for other types.
	StepsPerS *float64 `json:"steps_per_s,omitempty"`
	// MeanBatch is a policy worker's mean inference batch size.
	MeanBatch *float64 `json:"mean_batch,omitempty"`
	// Version is the parameter version the worker serves, trains or last
	// acted with.
	Version *int64 `json:"version,omitempty"`
	Warning string `json:"warning,omitempty"`
	// Note is information that is not a fault (member.Status.Note).
	Note  string `json:"note,omitempty"`
	Error string `json:"error,omitempty"`
	// Metrics is the worker process's /metrics address.
	Metrics string `json:"metrics,omitempty"`
	// Stats are the worker's key statistics (controller.KeyStats).
	Stats map[string]any `json:"stats,omitempty"`
}

// Point is one line of metrics.jsonl, as the charts use it.
type Point struct {
	Time       float64  `json:"t"` // Unix seconds
	ElapsedS   float64  `json:"elapsed_s"`
	EnvSteps   int64    `json:"env_steps"`
	Episodes   int64    `json:"episodes"`
	StepsPerS  float64  `json:"steps_per_s"`
	MeanReturn *float64 `json:"mean_return"`
	PolicyLag  *float64 `json:"policy_lag"`
	Version    *int64   `json:"version"`
	// DroppedShare is the PPO trainers' share of steps dropped (Metrics).
	DroppedShare *float64 `json:"dropped_share,omitempty"`
	// BestReturn and BestVersion are the evaluators' best (Metrics).
	BestReturn  *float64 `json:"best_return,omitempty"`
	BestVersion *int64   `json:"best_version,omitempty"`
}

// History is the reply of /api/history.
type History struct {
	// Run changes when the metrics start over (a new run of the trial):
	// a client then drops what it holds and asks from 0.
	Run int `json:"run"`
	// Since is the index of Points[0]; Next the index after the last
	// (what to ask next); Total is how many there are: Points stop short
	// of all when there are many.
	Since  int     `json:"since"`
	Next   int     `json:"next"`
	Total  int     `json:"total"`
	Points []Point `json:"points"`
}
