package e2e

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// The GPU path end to end: rlctl starts the policy worker of a CUDA
// experiment as an rlctl-cuda process. On a machine with a GPU the trial
// runs; on one without, it fails before anything starts, with one line.
// rlctl-cuda is found beside rlctl (bin/device/ on a lent GPU machine:
// ../shared/tools/device-bundle -tags cuda ./e2e), or built here where
// CUDA's headers are (make deps-cuda); else these skip, saying so.

var cudaBin struct {
	once sync.Once
	path string
	why  string // why there is none
	gpu  bool   // whether `rlctl-cuda devices` found a GPU
	list string // what it printed
}

// rlctlCUDA returns the rlctl-cuda binary and whether a GPU is present, or
// skips tb.
func rlctlCUDA(tb testing.TB) (bin string, gpu bool) {
	tb.Helper()
	cudaBin.once.Do(func() {
		p := filepath.Join(filepath.Dir(rlctl), "rlctl-cuda")
		if _, err := os.Stat(p); err != nil {
			if _, err := os.Stat("/usr/include/cuda.h"); err != nil {
				cudaBin.why = "no rlctl-cuda beside rlctl, and CUDA's headers are missing to build one (make deps-cuda)"
				return
			}
			if err := buildRlctl(p, "cuda"); err != nil {
				cudaBin.why = err.Error()
				return
			}
		}
		cudaBin.path = p
		out, err := exec.Command(p, "devices").CombinedOutput()
		cudaBin.gpu, cudaBin.list = err == nil, strings.TrimSpace(string(out))
	})
	if cudaBin.path == "" {
		tb.Skip(cudaBin.why)
	}
	return cudaBin.path, cudaBin.gpu
}

// startCUDA runs `rlctl start` of a CUDA experiment to its end and returns
// its exit code, stdout and stderr.
func startCUDA(t *testing.T, work string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	stdout, stderr, code = runOutputs(t, 4*time.Minute, noNameServer, append([]string{"start", "--workdir", work}, args...)...)
	return code, stdout, stderr
}

// TestCUDATrial: with a GPU, cartpole-ppo-cuda learns CartPole with its
// policy worker on cuda:0; without one, it and a device beyond those
// present fail at once with one line naming the worker, the device and
// the CUDA error, leaving no trial directory and no process behind.
func TestCUDATrial(t *testing.T) {
	if testing.Short() {
		t.Skip("starts trials")
	}
	_, gpu := rlctlCUDA(t)
	work := t.TempDir()
	if gpu {
		t.Logf("rlctl-cuda devices:\n%s", cudaBin.list)
		code, out, errOut := startCUDA(t, work, "cartpole-ppo-cuda", "t1", "--set", "stop.wall_time=3m")
		if code != 0 {
			t.Fatalf("cartpole-ppo-cuda exited %d:\n%s\n%s", code, out, errOut)
		}
		lines := readMetricsLines(t, filepath.Join(work, "cartpole-ppo-cuda", "t1", "metrics.jsonl"))
		last := lines[len(lines)-1]
		if last.MeanReturn < 475 {
			t.Errorf("cartpole-ppo-cuda ended at mean return %v, want 475", last.MeanReturn)
		}
		log := readFile(t, filepath.Join(work, "cartpole-ppo-cuda", "t1", "logs", "policy-0.log"))
		if !strings.Contains(log, "device=cuda:0") || !strings.Contains(log, "rlctl-cuda [worker") {
			t.Errorf("the policy worker's log does not show rlctl-cuda on cuda:0:\n%s", log)
		}
		t.Logf("reached %.0f after %d env steps in %.1f s", last.MeanReturn, last.EnvSteps, last.ElapsedS)
	}
	for _, tc := range []struct {
		name, device string
		want         *regexp.Regexp
	}{
		{"default device", "cuda:0", regexp.MustCompile(`^rlctl: controller: policy/0 \(device cuda:0\): rlctl-cuda: CUDA unavailable: cuInit: .+ \(CUDA_ERROR_[A-Z_]+\)\n$`)},
		{"device beyond those present", "cuda:5", regexp.MustCompile(`^rlctl: controller: policy/0 \(device cuda:5\): (rlctl-cuda: CUDA unavailable: cuInit: .+|rlctl-cuda: cuda:5: not present: the driver sees \d+ cuda devices .+)\n$`)},
	} {
		if gpu && tc.device == "cuda:0" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			trial := "nogpu-" + strings.ReplaceAll(tc.device, ":", "")
			began := time.Now()
			code, out, errOut := startCUDA(t, work, "cartpole-ppo-cuda", trial, "--set", "workers.policy.config.device="+tc.device)
			if code != 1 || !tc.want.MatchString(errOut) {
				t.Fatalf("exit %d, stderr %q; want 1 and one line matching %s (stdout %q)", code, errOut, tc.want, out)
			}
			if _, err := os.Stat(filepath.Join(work, "cartpole-ppo-cuda", trial)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("trial directory left behind: %v", err)
			}
			if left := processesOf(t, trial); len(left) > 0 {
				t.Errorf("processes of the trial left running: %v", left)
			}
			t.Logf("refused in %v: %s", time.Since(began).Round(time.Millisecond), strings.TrimSpace(errOut))
		})
	}
}

// processesOf lists the pids whose command line names trial.
func processesOf(t *testing.T, trial string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(trial)) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return out
}

// BenchmarkPipelineCUDA is the data plane at the size of a 16-core GPU
// machine: 14 actors of 64 CartPoles, one policy worker and 4 sinks, with the
// policy's forward pass on the CPU (rlctl) or on cuda:0 (rlctl-cuda), for
// CartPole's 64x64 network and a 512x512 one, in the same run; then the
// actors table (1, 2, 4, 8, 14) with the policy on cuda:0. It needs a GPU
// and skips without one.
func BenchmarkPipelineCUDA(b *testing.B) {
	bin, gpu := rlctlCUDA(b)
	if !gpu {
		b.Skipf("no GPU: %s", cudaBin.list)
	}
	c := newCluster(b)
	for _, hidden := range []int{64, 512} {
		for _, device := range []string{"cpu", "cuda:0"} {
			b.Run(fmt.Sprintf("net=%dx%d/device=%s", hidden, hidden, device), func(b *testing.B) {
				p := pipeline{actors: 14, ring: 64, policy: map[string]any{
					"device": device, "hidden": []int{hidden, hidden}, "max_batch": 1024,
				}}
				if device != "cpu" {
					p.policyBinary = bin
				}
				benchPipeline(b, c.benchTrial(b), p)
			})
		}
	}
	for _, actors := range []int{1, 2, 4, 8} { // 14 is above
		b.Run(fmt.Sprintf("net=64x64/device=cuda:0/actors=%d", actors), func(b *testing.B) {
			benchPipeline(b, c.benchTrial(b), pipeline{actors: actors, ring: 64, policyBinary: bin,
				policy: map[string]any{"device": "cuda:0", "max_batch": 1024}})
		})
	}
}

// BenchmarkMinAtarCUDA runs MinAtar Breakout's GPU built-ins on a 16-core
// machine with one GPU and measures frames/s and the trainer's samples/s
// from the first metrics line past 15 s (processes started, kernels
// compiled) to the last, and the mean return at the end:
// minatar-breakout-ppo-cuda for 75 s (MINATAR_CUDA_WINDOW) with its
// trainer on cuda:0 and then, same config, on the CPU; then
// minatar-breakout-apex-cuda and the CPU built-in minatar-breakout-apex
// for 45 s each. It needs a GPU and skips without one.
func BenchmarkMinAtarCUDA(b *testing.B) {
	if _, gpu := rlctlCUDA(b); !gpu {
		b.Skipf("no GPU: %s", cudaBin.list)
	}
	window := cmp.Or(os.Getenv("MINATAR_CUDA_WINDOW"), "75s")
	// The GPU trainers take samples in while they update (overlap, their
	// default); the rows with "/overlap=false" run them in turn, to
	// measure what that is worth.
	for _, c := range []struct {
		exp, trainer, window string
		inTurn               bool
	}{
		{"minatar-breakout-ppo-cuda", "cuda:0", window, false},
		{"minatar-breakout-ppo-cuda", "cuda:0", "45s", true},
		{"minatar-breakout-ppo-cuda", "cpu", "45s", false},
		{"minatar-breakout-apex-cuda", "cuda:0", "45s", false},
		{"minatar-breakout-apex-cuda", "cuda:0", "45s", true},
		{"minatar-breakout-apex", "cpu", "45s", false},
	} {
		name := fmt.Sprintf("exp=%s/trainer=%s", c.exp, c.trainer)
		args := []string{"start", "--workdir", "", c.exp, "t", "--set", "stop.wall_time=" + c.window,
			"--set", "workers.trainer.config.device=" + c.trainer}
		if c.inTurn {
			name += "/overlap=false"
			args = append(args, "--set", "workers.trainer.config.overlap=false")
		}
		b.Run(name, func(b *testing.B) {
			work := b.TempDir()
			args[2] = work
			_, errOut, code := runOutputs(b, 5*time.Minute, noNameServer, args...)
			if code != 0 {
				b.Fatalf("rlctl start exited %d: %s", code, errOut)
			}
			lines := readMetricsLines(b, filepath.Join(work, c.exp, "t", "metrics.jsonl"))
			first := -1
			for i, l := range lines {
				if l.ElapsedS >= 15 {
					first = i
					break
				}
			}
			if first < 0 || first == len(lines)-1 {
				b.Fatalf("%d metrics lines, none after 15 s to measure from", len(lines))
			}
			a, z := lines[first], lines[len(lines)-1]
			secs := z.ElapsedS - a.ElapsedS
			// perSecond is the growth of one of the trainer's figures over
			// the window, per second.
			perSecond := func(key string) float64 {
				from, _ := a.Workers["trainer/0"][key].(float64)
				to, _ := z.Workers["trainer/0"][key].(float64)
				return (to - from) / secs
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(float64(z.EnvSteps-a.EnvSteps)/secs, "frames/s")
			b.ReportMetric(perSecond("samples_trained"), "trained/s")
			// What bounds the trainer: the shares of the window its learner
			// updated and its loop was busy outside updates.
			b.ReportMetric(perSecond("update_s"), "learner-busy")
			b.ReportMetric(perSecond("loop_s"), "loop-busy")
			b.ReportMetric(z.MeanReturn, "return")
			b.ReportMetric(float64(z.EnvSteps), "frames")
		})
	}
}
