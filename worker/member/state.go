package member

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"
)

// State is a worker's lifecycle state.
type State string

const (
	StateReady       State = "READY"
	StateConfigured  State = "CONFIGURED"
	StateRunning     State = "RUNNING"
	StatePaused      State = "PAUSED"
	StateCompleted   State = "COMPLETED"
	StateError       State = "ERROR"
	StateInterrupted State = "INTERRUPTED"
	// StateLost is concluded by a ControlPanel when the address lease is gone.
	StateLost State = "LOST"
	// StateHung is concluded by a ControlPanel when the address lease lives
	// but the loop's heartbeat in the status record is older than the
	// panel's HungAfter: the process is alive, its loop is stuck.
	StateHung State = "HUNG"
)

// Final reports whether a worker in state s will do no more work.
func (s State) Final() bool {
	switch s {
	case StateCompleted, StateError, StateInterrupted, StateLost:
		return true
	}
	return false
}

// written reports whether s is a state a worker writes into its records.
func (s State) written() bool {
	switch s {
	case StateReady, StateConfigured, StateRunning, StatePaused, StateCompleted, StateError, StateInterrupted:
		return true
	}
	return false
}

// Status is a worker's status record: the reply of the "status" command and
// the JSON value stored under names.Trial.Status(name).
type Status struct {
	Name string `json:"name" msgpack:"name"`
	// Type is the worker's type where its group (Name's first part) is
	// named otherwise; "": the group's name is the type.
	Type  string `json:"type,omitempty" msgpack:"type,omitempty"`
	State State  `json:"state" msgpack:"state"`
	Error string `json:"error,omitempty" msgpack:"error,omitempty"`
	// Warning says what is degraded while the worker keeps working.
	Warning string `json:"warning,omitempty" msgpack:"warning,omitempty"`
	// Note is information about the worker's state that is not a fault
	// (an actor bound by its trainer says so).
	Note    string `json:"note,omitempty" msgpack:"note,omitempty"`
	Address string `json:"address,omitempty" msgpack:"address,omitempty"`
	Host    string `json:"host,omitempty" msgpack:"host,omitempty"`
	PID     int    `json:"pid,omitempty" msgpack:"pid,omitempty"`
	// UpdatedMs is when the state last changed, in Unix milliseconds.
	UpdatedMs int64 `json:"updated_ms" msgpack:"updated_ms"`
	// Loop names the loop record of the loop that runs the worker (all the
	// workers of one process share one); "" for a member with no loop.
	Loop string `json:"loop,omitempty" msgpack:"loop,omitempty"`
	// Loops counts the turns of the worker loop and HeartbeatMs is when the
	// loop last published them (Unix ms), from its loop record
	// (LoopRecord). 0: not known yet.
	Loops       int64 `json:"loops,omitempty" msgpack:"loops,omitempty"`
	HeartbeatMs int64 `json:"heartbeat_ms,omitempty" msgpack:"heartbeat_ms,omitempty"`
	// Metrics is the "host:port" whose /metrics serves the worker's
	// Prometheus metrics (shared by the workers of one process); "": none.
	Metrics string `json:"metrics,omitempty" msgpack:"metrics,omitempty"`
}

// TypeOf is the worker type of the worker the status is of: Type, or the
// group part of its name.
func (s Status) TypeOf() string {
	if s.Type != "" {
		return s.Type
	}
	group, _, _ := strings.Cut(s.Name, "/")
	return group
}

// Remark is what a listing says of the worker besides its state: its
// error, else its warning, else its note; "" when there is none.
func (s Status) Remark() string {
	switch {
	case s.Error != "":
		return "error: " + s.Error
	case s.Warning != "":
		return "warning: " + s.Warning
	case s.Note != "":
		return "note: " + s.Note
	}
	return ""
}

// Updated is UpdatedMs as a time.
func (s Status) Updated() time.Time { return time.UnixMilli(s.UpdatedMs) }

// ProcessStatus is the status record of a member named name in state,
// answering at addr, run by this process; updated is when its state last
// changed.
func ProcessStatus(name string, state State, addr string, updated time.Time) Status {
	host, _ := os.Hostname()
	return Status{Name: name, State: state, Address: addr, Host: host, PID: os.Getpid(), UpdatedMs: updated.UnixMilli()}
}

// Record is s as stored under names.Trial.Status(name): JSON.
func (s Status) Record() string {
	b, _ := json.Marshal(s) // a struct of strings and ints always marshals
	return string(b)
}

// ParseStatusRecord reads a status record; one without a state a worker
// writes is an error (anyone who can write to etcd can write there).
func ParseStatusRecord(v string) (Status, error) {
	var s Status
	if err := json.Unmarshal([]byte(v), &s); err != nil {
		return s, err
	}
	if !s.State.written() {
		return s, fmt.Errorf("state %q is not a worker's", s.State)
	}
	return s, nil
}

// LoopRecord is the value of a loop record (names.Trial.Loop): the
// heartbeat of the loop that runs a process's workers. Their status
// records name it (Status.Loop); only the loop itself advances it, every
// Options.Heartbeat, unlike the address lease that the etcd client's own
// goroutine keeps alive.
type LoopRecord struct {
	Loops       int64  `json:"loops"`
	HeartbeatMs int64  `json:"heartbeat_ms"`
	Workers     int    `json:"workers"`
	Host        string `json:"host,omitempty"`
	PID         int    `json:"pid,omitempty"`
}

// Record is r as stored under names.Trial.Loop: JSON.
func (r LoopRecord) Record() string {
	b, _ := json.Marshal(r) // ints and strings always marshal
	return string(b)
}

// ParseLoopRecord reads a loop record.
func ParseLoopRecord(v string) (LoopRecord, error) {
	var r LoopRecord
	err := json.Unmarshal([]byte(v), &r)
	return r, err
}
