package controller

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/rpc"
)

// ErrControllerRunning: another controller is running the trial.
var ErrControllerRunning = errors.New("controller: another controller is running this trial")

// ErrNameResolve: the name server cannot serve the trial's workers (a
// cluster trial needs an etcd every node reaches).
var ErrNameResolve = errors.New("controller: name server")

// WorkersAliveError: the trial's name records show live workers, so a new
// run would fight them for their names. Stop them first (`rlctl stop`).
type WorkersAliveError struct {
	Prefix  string
	Workers []string
}

func (e *WorkersAliveError) Error() string {
	return fmt.Sprintf("controller: %d workers of %s are alive: %s (stop them with `rlctl stop`, or wait for them to exit)",
		len(e.Workers), e.Prefix, strings.Join(e.Workers, ", "))
}

// Unregistered is one worker process whose workers did not all register
// in time.
type Unregistered struct {
	// Worker names the process: the worker's name, or a host's
	// "{type}/{first}-{last}".
	Worker string
	// Workers are those of its workers that did not register.
	Workers []string
	Log     string
	// Exit says how its process ended, "" if it is still running.
	Exit string
	// Tail is the end of its log.
	Tail string
}

// RegisterError: workers did not register their addresses within the
// timeout, or their processes exited first.
type RegisterError struct {
	Timeout time.Duration
	Missing []Unregistered
}

func (e *RegisterError) Error() string {
	var b strings.Builder
	n := 0
	for _, m := range e.Missing {
		n += max(len(m.Workers), 1)
	}
	fmt.Fprintf(&b, "controller: %d workers did not register within %v:", n, e.Timeout)
	for i, m := range e.Missing {
		if i == 8 {
			fmt.Fprintf(&b, "\n  ... and %d more processes", len(e.Missing)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s (log %s)", m.Worker, m.Log)
		if len(m.Workers) > 1 || len(m.Workers) == 1 && m.Workers[0] != m.Worker {
			fmt.Fprintf(&b, ", %d of its workers: %s", len(m.Workers), abbreviate(m.Workers, 4))
		}
		if m.Exit != "" {
			fmt.Fprintf(&b, ": exited, %s", m.Exit)
		}
		if m.Tail != "" {
			fmt.Fprintf(&b, "\n    %s", strings.ReplaceAll(strings.TrimSpace(m.Tail), "\n", "\n    "))
		}
	}
	return b.String()
}

// abbreviate lists the first n of names and says how many more there are.
func abbreviate(names []string, n int) string {
	if len(names) <= n {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:n], ", "), len(names)-n)
}

// ConfigureError: workers refused their configuration or the start
// command. Restarting cannot fix a configuration, so the trial fails.
type ConfigureError struct {
	Command string
	// Failures maps worker names to what went wrong.
	Failures map[string]error
}

// Refused reports whether a worker answered with an error (a remote
// error reply: it refused the command), rather than not answering.
func (e *ConfigureError) Refused() bool {
	for _, err := range e.Failures {
		var re *rpc.Error
		if errors.As(err, &re) {
			return true
		}
	}
	return false
}

func (e *ConfigureError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "controller: %s failed on %d workers:", e.Command, len(e.Failures))
	names := make([]string, 0, len(e.Failures))
	for n := range e.Failures {
		names = append(names, n)
	}
	slices.Sort(names)
	for i, n := range names {
		if i == 8 { // thousands of hosted workers fail alike: a few say it
			fmt.Fprintf(&b, "\n  ... and %d more", len(names)-i)
			break
		}
		fmt.Fprintf(&b, "\n  %s: %v", n, e.Failures[n])
	}
	return b.String()
}

// WorkerFailedError: a worker process failed again after its last allowed
// restart.
type WorkerFailedError struct {
	// Worker names the process (a host's "{type}/{first}-{last}"); Reason
	// names the hosted worker that failed when it is one of many.
	Worker   string
	Reason   string
	Restarts int
	Log      string
}

func (e *WorkerFailedError) Error() string {
	return fmt.Sprintf("controller: worker %s failed after %d restarts: %s (log %s)", e.Worker, e.Restarts, e.Reason, e.Log)
}
