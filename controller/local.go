package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"
)

// Local runs every worker as an `rlctl worker` child process of this one
// (or of the spec's Executable, such as rlctl-cuda).
type Local struct {
	// Executable is the rlctl binary; os.Executable() when empty.
	Executable string

	mu    sync.Mutex
	procs map[*localHandle]struct{} // running
}

var _ Scheduler = (*Local)(nil)

// NewLocal returns a local scheduler running executable ("" for this
// process's own binary).
func NewLocal(executable string) (*Local, error) {
	if executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("controller: local scheduler: find rlctl: %w", err)
		}
		executable = exe
	}
	return &Local{Executable: executable, procs: map[*localHandle]struct{}{}}, nil
}

// Start runs `rlctl worker --type T --index I [--count N] ARGS...` with
// its output appended to spec.LogPath.
func (l *Local) Start(ctx context.Context, spec WorkerSpec) (Handle, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("controller: start %s: %w", spec.Name, err)
	}
	if err := os.MkdirAll(filepath.Dir(spec.LogPath), 0o755); err != nil {
		return nil, fmt.Errorf("controller: start %s: %w", spec.Name, err)
	}
	log, err := os.OpenFile(spec.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("controller: start %s: %w", spec.Name, err)
	}
	args := append(workerCommand(spec), spec.Args...)
	exe := cmp.Or(spec.Executable, l.Executable)
	// A restarted worker appends to the same log: mark where each run begins.
	fmt.Fprintf(log, "=== %s: %s %v\n", time.Now().Format(time.RFC3339), filepath.Base(exe), args)
	// Not CommandContext: the worker outlives ctx, which bounds the launch only.
	cmd := exec.Command(exe, args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("controller: start %s: %w", spec.Name, err)
	}
	h := &localHandle{cmd: cmd, done: make(chan struct{})}
	l.mu.Lock()
	l.procs[h] = struct{}{}
	l.mu.Unlock()
	go func() {
		h.err = cmd.Wait()
		log.Close()
		l.mu.Lock()
		delete(l.procs, h)
		l.mu.Unlock()
		close(h.done)
	}()
	return h, nil
}

// workerCommand is `worker --type T [--group G] --index I`, with
// `--count N` for a process that hosts several workers.
func workerCommand(spec WorkerSpec) []string {
	args := append(append([]string{"worker"}, spec.TypeArgs()...), "--index", strconv.Itoa(spec.Index))
	if spec.Hosts() > 1 {
		args = append(args, "--count", strconv.Itoa(spec.Hosts()))
	}
	return args
}

// StopAll sends SIGTERM to every running worker, waits for them until ctx
// ends, then kills the rest and waits for those.
func (l *Local) StopAll(ctx context.Context) error {
	l.mu.Lock()
	running := make([]*localHandle, 0, len(l.procs))
	for h := range l.procs {
		running = append(running, h)
	}
	l.mu.Unlock()
	for _, h := range running {
		_ = h.Signal(syscall.SIGTERM) // one that just exited cannot be signalled: fine
	}
	var killed int
	for _, h := range running {
		select {
		case <-h.done:
			continue
		case <-ctx.Done():
		}
		// select picks at random among ready cases: one that exited just as
		// ctx ended must not be counted as killed.
		select {
		case <-h.done:
			continue
		default:
		}
		if h.cmd.Process.Kill() == nil {
			killed++
		}
		<-h.done // SIGKILL cannot be refused
	}
	if killed > 0 {
		return fmt.Errorf("controller: killed %d workers that did not stop on SIGTERM: %w", killed, ctx.Err())
	}
	return nil
}

// localHandle is one child process.
type localHandle struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error // set before done closes
}

func (h *localHandle) PID() int              { return h.cmd.Process.Pid }
func (h *localHandle) Done() <-chan struct{} { return h.done }

func (h *localHandle) Wait() error {
	<-h.done
	return h.err
}

func (h *localHandle) Signal(sig os.Signal) error {
	if err := h.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("controller: signal pid %d: %w", h.PID(), err)
	}
	return nil
}

func (h *localHandle) Kill() error {
	if err := h.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("controller: kill pid %d: %w", h.PID(), err)
	}
	return nil
}
