package controller

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// fakeWorker stands in for rlctl: it prints its arguments and sleeps until
// signalled; with --index 1 it ignores SIGTERM, so StopAll must kill it.
const fakeWorker = `#!/bin/sh
echo "args: $*"
if [ "$5" = 1 ]; then trap '' TERM; echo "ignoring TERM"; fi
exec sleep 30
`

func TestLocalScheduler(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "rlctl")
	if err := os.WriteFile(exe, []byte(fakeWorker), 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := NewLocal(exe)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var hs []Handle
	for i := range 2 {
		spec := WorkerSpec{Type: "echo", Index: i, Name: "echo/" + string(rune('0'+i)), Args: []string{"--ttl", "3s"},
			LogPath: TrialDir(dir).Log("echo/" + string(rune('0'+i)))}
		h, err := l.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		if h.PID() <= 0 || !ProcessAlive(h.PID()) {
			t.Fatalf("pid %d not alive", h.PID())
		}
		hs = append(hs, h)
	}
	// The log has the start marker and the worker's own output; worker 1
	// says when its trap is in place, so StopAll's SIGTERM cannot beat it.
	waitLog := func(name, want string) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			b, _ := os.ReadFile(filepath.Join(dir, "logs", name))
			if strings.Contains(string(b), want) && strings.Contains(string(b), "=== ") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %q", name, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitLog("echo-0.log", "args: worker --type echo --index 0 --ttl 3s")
	waitLog("echo-1.log", "ignoring TERM")
	sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	err = l.StopAll(sctx)
	if err == nil || !strings.Contains(err.Error(), "killed 1") {
		t.Errorf("StopAll = %v, want one worker killed", err)
	}
	for i, h := range hs {
		select {
		case <-h.Done():
		default:
			t.Fatalf("worker %d still running after StopAll", i)
		}
	}
	var ee *exec.ExitError
	if !errors.As(hs[0].Wait(), &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
		t.Errorf("worker 0 ended with %v, want SIGTERM", hs[0].Wait())
	}
	if err := hs[0].Signal(syscall.SIGTERM); err != nil {
		t.Errorf("Signal after exit = %v, want nil", err)
	}
	if _, err := l.Start(canceled(), WorkerSpec{Name: "echo/9", LogPath: filepath.Join(dir, "x.log")}); err == nil {
		t.Error("Start with a cancelled context succeeded")
	}
}

func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestRecordRoundTrip(t *testing.T) {
	d := NewTrialDir(t.TempDir(), "exp", "t1")
	if err := os.MkdirAll(string(d), 0o755); err != nil {
		t.Fatal(err)
	}
	host, _ := os.Hostname()
	r := &Record{PID: os.Getpid(), Host: host, State: StateRunning, Started: time.Now().Round(0), Workers: map[string]int{"a/0": 1}}
	if err := d.writeRecord(r); err != nil {
		t.Fatal(err)
	}
	got, err := d.ReadRecord()
	if err != nil {
		t.Fatal(err)
	}
	if got.PID != r.PID || got.Workers["a/0"] != 1 || !got.Alive() {
		t.Errorf("read back %+v (alive %v)", got, got.Alive())
	}
	got.State = StateCompleted
	if got.Alive() {
		t.Error("a completed record is alive")
	}
	if ProcessAlive(0) || ProcessAlive(1<<30) {
		t.Error("ProcessAlive of impossible pids")
	}
	if d.Log("actor/3") != filepath.Join(string(d), "logs", "actor-3.log") {
		t.Errorf("Log = %s", d.Log("actor/3"))
	}
}
