package e2e

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestCUDATrialsOnEmulator: the GPU trials end to end where no GPU is,
// with rlctl built with the tag cudaemu (nn/cuda's host emulator in the
// driver's place; docs/gpu.md) as the binary rlctl starts CUDA workers
// with. Every process, socket and stream is real; only the kernels run on
// the CPU. cartpole-ppo-cuda, with its trainer on cuda:0 too, learns
// CartPole; minatar-breakout-ppo-cuda's GPU trainer (whole steps beside
// its intake) and minatar-breakout-apex-cuda's GPU learner (whole updates,
// priorities back to the replay) publish versions that the GPU policy
// worker serves. It says nothing of a GPU's speed.
func TestCUDATrialsOnEmulator(t *testing.T) {
	if testing.Short() {
		t.Skip("starts trials")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go to build rlctl-cudaemu with (a bundle on a GPU machine runs TestCUDATrial instead)")
	}
	bin := filepath.Join(t.TempDir(), "rlctl-cudaemu")
	if err := buildRlctl(bin, "cudaemu"); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	run := func(t *testing.T, experiment string, set ...string) metricsLine {
		t.Helper()
		args := []string{experiment, "t1", "--cuda-binary", bin}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		code, out, errOut := startCUDA(t, work, args...)
		if code != 0 {
			t.Fatalf("%s exited %d:\n%s\n%s", experiment, code, out, errOut)
		}
		dir := filepath.Join(work, experiment, "t1")
		for _, w := range []string{"policy-0", "trainer-0"} {
			log := readFile(t, filepath.Join(dir, "logs", w+".log"))
			if !strings.Contains(log, "device=cuda:0") || !strings.Contains(log, "rlctl-cudaemu [worker") {
				t.Errorf("%s's log does not show rlctl-cudaemu on cuda:0:\n%s", w, log)
			}
		}
		lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
		last := lines[len(lines)-1]
		t.Logf("%s: %d env steps in %.1f s, version %d, mean return %.1f", experiment, last.EnvSteps, last.ElapsedS, last.Version, last.MeanReturn)
		return last
	}
	trainerStat := func(t *testing.T, last metricsLine, key string) float64 {
		t.Helper()
		v, ok := last.Workers["trainer/0"][key].(float64)
		if !ok {
			t.Fatalf("trainer/0 has no %s: %v", key, last.Workers["trainer/0"])
		}
		return v
	}
	t.Run("cartpole-ppo-cuda", func(t *testing.T) {
		last := run(t, "cartpole-ppo-cuda", "workers.trainer.config.device=cuda:0", "stop.wall_time=3m")
		if last.MeanReturn < 475 {
			t.Errorf("ended at mean return %v, want 475", last.MeanReturn)
		}
	})
	t.Run("minatar-breakout-ppo-cuda", func(t *testing.T) {
		// Updates of 1024 steps; the actors are held back by the trainer
		// (on-policy) once its intake and their queues are full (about 5k
		// steps), so 16k env steps take updates however slow the machine.
		last := run(t, "minatar-breakout-ppo-cuda", "workers.actor.count=2", "workers.trainer.config.batch_steps=1024",
			"workers.trainer.config.ppo.minibatch_size=256", "stop.env_steps=16384", "stop.wall_time=3m")
		if updates := trainerStat(t, last, "updates"); updates < 1 || last.Version < 1 {
			t.Errorf("%v updates, version %d: the GPU trainer published nothing", updates, last.Version)
		}
	})
	t.Run("minatar-breakout-apex-cuda", func(t *testing.T) {
		// The replay's rate limiter holds the actors to the learner past its
		// first 5000 samples' lead, so 8000 env steps take updates.
		last := run(t, "minatar-breakout-apex-cuda", "workers.actor.count=2", "stop.env_steps=8000", "stop.wall_time=3m")
		updates, sent := trainerStat(t, last, "updates"), trainerStat(t, last, "priorities_sent")
		if updates < 1 || sent < 1 || last.Version < 1 {
			t.Errorf("%v updates, %v priorities sent, version %d: the GPU learner did not learn from the replay", updates, sent, last.Version)
		}
	})
}
