package controller

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/panel"
)

// queuedHandle is a task that is queued for its first `queued` calls of
// Queued (the controller asks at each register timeout), then runs: on
// the first call that finds it running its worker registers, or never
// with register false.
type queuedHandle struct {
	mu       sync.Mutex
	calls    int
	queued   int
	register func()
	done     chan struct{}
}

func (h *queuedHandle) Queued() (bool, string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	if h.calls <= h.queued {
		return true, "PENDING: JobHeldUser"
	}
	if h.register != nil {
		h.register()
		h.register = nil
	}
	return false, ""
}

func (h *queuedHandle) PID() int               { return 0 }
func (h *queuedHandle) Done() <-chan struct{}  { return h.done }
func (h *queuedHandle) Wait() error            { <-h.done; return nil }
func (h *queuedHandle) Signal(os.Signal) error { return nil }
func (h *queuedHandle) Kill() error            { return nil }
func (h *queuedHandle) callsMade() int         { h.mu.Lock(); defer h.mu.Unlock(); return h.calls }
func (h *queuedHandle) setRegister(f func())   { h.mu.Lock(); defer h.mu.Unlock(); h.register = f }

// Time in the queue does not count against the register timeout, and a
// task that leaves the queue just before a timeout still gets a whole one
// to register: here it registers at the very timeout that first finds it
// running, which failed the trial before.
func TestWaitRegisteredCountsFromTheQueue(t *testing.T) {
	trial := names.NewTrial("unit", "register")
	for _, tc := range []struct {
		name      string
		queued    int
		registers bool
		wantErr   bool
		wantCalls int
	}{
		{"registers as it leaves the queue", 2, true, false, 3},
		{"never registers after the queue", 2, false, true, 4},
		{"never queued, never registers", 0, false, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo := nameresolve.NewMemory()
			defer repo.Close()
			p := panel.New(repo, trial, panel.Options{})
			defer p.Close()
			var out strings.Builder
			c := &Controller{panel: p, out: &progress{out: &out}}
			h := &queuedHandle{queued: tc.queued, done: make(chan struct{})}
			if tc.registers {
				h.setRegister(func() {
					if err := repo.Add(context.Background(), trial.Worker("echo/0"), "127.0.0.1:1", nameresolve.AddOptions{}); err != nil {
						t.Error(err)
					}
				})
			}
			spec := WorkerSpec{Type: "echo", Name: "echo/0", Workers: []string{"echo/0"}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			err := c.waitRegistered(ctx, []launched{{spec: spec, handle: h}}, 300*time.Millisecond)
			var re *RegisterError
			if tc.wantErr != (err != nil) || err != nil && !errors.As(err, &re) {
				t.Fatalf("waitRegistered = %v, want a RegisterError: %v", err, tc.wantErr)
			}
			if got := h.callsMade(); got != tc.wantCalls {
				t.Errorf("%d register timeouts passed, want %d", got, tc.wantCalls)
			}
			if want := tc.queued; strings.Count(out.String(), "still queued") != want {
				t.Errorf("output %q: want %d lines saying the task is still queued", out.String(), want)
			}
		})
	}
}
