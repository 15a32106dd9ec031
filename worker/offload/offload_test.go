package offload_test

import (
	"errors"
	"testing"
	"time"

	"github.com/distrl/distrl/worker/offload"
	"golang.org/x/sys/unix"
)

// readable polls fd for up to wait.
func readable(t *testing.T, fd int, wait time.Duration) bool {
	t.Helper()
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(wait.Milliseconds()))
	if err != nil {
		t.Fatal(err)
	}
	return n > 0
}

func newJob(t *testing.T) *offload.Job[int] {
	t.Helper()
	j, err := offload.New[int]()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}

func TestJob(t *testing.T) {
	for _, tc := range []struct {
		name    string
		f       func() (int, error)
		want    int
		wantErr error
	}{
		{"value", func() (int, error) { return 42, nil }, 42, nil},
		{"error", func() (int, error) { return 0, errors.New("boom") }, 0, nil},
		{"panic", func() (int, error) { panic("kaboom") }, 0, offload.ErrPanicked},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := newJob(t)
			if _, ok := j.Done(); ok {
				t.Fatal("Done before any Start")
			}
			release := make(chan struct{})
			if err := j.Start(func() (int, error) { <-release; return tc.f() }); err != nil {
				t.Fatal(err)
			}
			if !j.Running() {
				t.Fatal("not Running after Start")
			}
			if err := j.Start(tc.f); !errors.Is(err, offload.ErrBusy) {
				t.Fatalf("second Start: %v, want ErrBusy", err)
			}
			if readable(t, j.Fd(), 20*time.Millisecond) {
				t.Fatal("fd readable while the job runs")
			}
			if _, ok := j.Done(); ok {
				t.Fatal("Done while the job runs")
			}
			close(release)
			if !readable(t, j.Fd(), 10*time.Second) {
				t.Fatal("fd not readable after the job finished")
			}
			r, ok := j.Done()
			if !ok {
				t.Fatal("not Done with the fd readable")
			}
			if r.Value != tc.want {
				t.Errorf("value %d, want %d", r.Value, tc.want)
			}
			switch {
			case tc.wantErr != nil && !errors.Is(r.Err, tc.wantErr):
				t.Errorf("err %v, want %v", r.Err, tc.wantErr)
			case tc.wantErr == nil && tc.name == "error" && r.Err == nil:
				t.Error("the function's error was lost")
			}
			if j.Running() || readable(t, j.Fd(), 0) {
				t.Fatal("still running, or the fd still readable, after Done collected the result")
			}
			// The next job starts clean.
			if err := j.Start(func() (int, error) { return 7, nil }); err != nil {
				t.Fatal(err)
			}
			if r, ok := j.Wait(); !ok || r.Value != 7 || r.Err != nil {
				t.Fatalf("Wait: %+v %v", r, ok)
			}
			if readable(t, j.Fd(), 0) {
				t.Fatal("fd readable after Wait collected the result")
			}
		})
	}
}

// TestJobFdNeverStaysReadable starts and collects many short jobs the way
// a loop does (wait for the fd, then Done), and requires the fd quiet after
// each collection: a signal that outlived its result would make a loop
// spin.
func TestJobFdNeverStaysReadable(t *testing.T) {
	j := newJob(t)
	for i := range 2000 {
		if err := j.Start(func() (int, error) { return i, nil }); err != nil {
			t.Fatal(err)
		}
		var r offload.Result[int]
		for ok := false; !ok; {
			if !readable(t, j.Fd(), 10*time.Second) {
				t.Fatalf("job %d: fd not readable", i)
			}
			r, ok = j.Done()
		}
		if r.Value != i {
			t.Fatalf("job %d returned %d", i, r.Value)
		}
		if readable(t, j.Fd(), 0) {
			t.Fatalf("job %d: fd readable after its result was collected", i)
		}
	}
}

func TestJobClose(t *testing.T) {
	j, err := offload.New[int]()
	if err != nil {
		t.Fatal(err)
	}
	finished := false
	if err := j.Start(func() (int, error) { time.Sleep(20 * time.Millisecond); finished = true; return 1, nil }); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	if !finished {
		t.Fatal("Close returned before the running job finished")
	}
	if err := j.Start(func() (int, error) { return 0, nil }); !errors.Is(err, offload.ErrClosed) {
		t.Fatalf("Start after Close: %v, want ErrClosed", err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}
