package worker

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// handOffChildEnv makes TestHandOffChild the process half of
// BenchmarkHandOff: it holds the number of yields to make.
const handOffChildEnv = "DISTRL_HANDOFF_CHILD_YIELDS"

// BenchmarkHandOff is what a hand-off between two runnable loops costs
// the machine: two loops on one CPU yield to each other (sched_yield, as
// a worker loop's looks do), so that every yield switches from one to the
// other. "alone" is one loop yielding with nobody to switch to (the
// system call alone), "threads" two threads of one process, "processes"
// two processes, as an actor and its policy worker are. ns/switch is the
// time per yield.
//
// Why it is in make bench: the pipelines of few environments per actor
// are bound by hand-offs, and what one costs is the machine's. On the
// 2-core development VM (a PVM guest) a switch between processes costs
// 2-3 times a switch between threads, since it changes address spaces.
func BenchmarkHandOff(b *testing.B) {
	for _, mode := range []string{"alone", "threads", "processes"} {
		b.Run(mode, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			restore, err := pinToOneCPU()
			if err != nil {
				b.Fatal(err)
			}
			defer restore()
			var elapsed time.Duration
			switch mode {
			case "alone":
				b.ResetTimer()
				yieldN(b.N)
				elapsed = b.Elapsed()
			case "threads":
				elapsed = handOffThreads(b, b.N)
			case "processes":
				elapsed = handOffProcesses(b, b.N)
			}
			b.ReportMetric(0, "ns/op")
			switches := float64(b.N)
			if mode != "alone" {
				switches *= 2
			}
			b.ReportMetric(float64(elapsed.Nanoseconds())/switches, "ns/switch")
		})
	}
}

// TestHandOffChild is the second process of BenchmarkHandOff/processes,
// and skips when run as a test.
func TestHandOffChild(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(handOffChildEnv))
	if err != nil {
		t.Skip("the second process of BenchmarkHandOff")
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	restore, err := pinToOneCPU()
	if err != nil {
		t.Fatal(err)
	}
	defer restore()
	fmt.Println("ready")
	yieldN(n)
}

// pinToOneCPU keeps the calling thread (locked to its goroutine) on the
// first CPU it may use and returns what restores its previous mask, to be
// called before the thread is unlocked: an unlocked thread goes back to
// the runtime's pool, and a pinned one would pin whatever runs on it next.
func pinToOneCPU() (restore func(), err error) {
	var prev, one unix.CPUSet
	if err := unix.SchedGetaffinity(0, &prev); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	for c := 0; c < 1024; c++ {
		if prev.IsSet(c) {
			one.Set(c)
			break
		}
	}
	if err := unix.SchedSetaffinity(0, &one); err != nil {
		return nil, fmt.Errorf("sched_setaffinity: %w", err)
	}
	return func() { _ = unix.SchedSetaffinity(0, &prev) }, nil
}

func yieldN(n int) {
	for range n {
		unix.RawSyscall(unix.SYS_SCHED_YIELD, 0, 0, 0)
	}
}

// handOffThreads times n yields on this thread against n on another
// thread pinned to the same CPU.
func handOffThreads(b *testing.B, n int) time.Duration {
	ready, done := make(chan error), make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		restore, err := pinToOneCPU()
		ready <- err // b.Fatal belongs to the benchmark's goroutine
		if err != nil {
			return
		}
		defer restore()
		yieldN(n)
	}()
	if err := <-ready; err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	yieldN(n)
	<-done
	return b.Elapsed()
}

// handOffProcesses times n yields in this process against n in a child
// process (this test binary, as TestHandOffChild) pinned to the same CPU.
func handOffProcesses(b *testing.B, n int) time.Duration {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHandOffChild$")
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%d", handOffChildEnv, n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || line != "ready\n" {
		b.Fatalf("child: %q, %v", line, err)
	}
	b.ResetTimer()
	yieldN(n)
	if err := cmd.Wait(); err != nil {
		b.Fatalf("child: %v", err)
	}
	return b.Elapsed()
}
