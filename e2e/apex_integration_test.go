package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
)

// cartpole-apex through rlctl start: actors insert n-step transitions into
// a replay worker, a DQN trainer samples it and sends priorities back. The
// replay worker and the trainer are SIGKILLed mid-run: the controller
// restarts them, the replay resumes its table and the trainer its networks
// from their checkpoints, actors and trainer reconnect, and the run reaches
// its target return.
func TestStartCartPoleApexSurvivesKills(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "cartpole-apex", "t9", "--workdir", work,
		"--set", "metrics_interval=300ms", "--set", "stop.wall_time=5m",
		"--set", "workers.replay.config.checkpoint_every_s=3", // not more often: every checkpoint is an fsync beside etcd's
		"--set", "workers.trainer.config.checkpoint_every=200",
		// Below the built-in 475 to keep the run short under -race, above
		// what the first seconds reach so that the kills come first; a
		// greedy policy of an untrained network scores about 10.
		"--set", "stop.target_return=300")
	waitOutput(t, p, regexp.MustCompile(`all 7 workers running`), 30*time.Second)
	dir := filepath.Join(work, "cartpole-apex", "t9")
	metrics := filepath.Join(dir, "metrics.jsonl")
	ckpts := filepath.Join(dir, "checkpoints", "replay", "0", "replay-default-*.ckpt")
	trainerCkpts := filepath.Join(dir, "checkpoints", "dqn-*.ckpt")
	var before int64
	eventually.NoError(t, 90*time.Second, "training with a trainer checkpoint", func() error {
		lines := readMetricsLines(t, metrics)
		tfiles, _ := filepath.Glob(trainerCkpts)
		if len(lines) == 0 || lines[len(lines)-1].Version < 200 || len(tfiles) == 0 {
			return fmt.Errorf("%d metrics lines, %d trainer checkpoints", len(lines), len(tfiles))
		}
		before = lines[len(lines)-1].Version
		return nil
	})
	rec := readRecord(t, dir)
	// Checkpoint the replay now instead of waiting for its period: on a
	// quiet machine the run can reach its target within one period.
	env := []string{"RLCTL_NAMERESOLVE=" + rec.NameResolve, "RLCTL_EXPERIMENT=cartpole-apex", "RLCTL_TRIAL=t9"}
	if out, code := runRlctl(t, env, "request", "replay/0", "checkpoint"); code != 0 {
		t.Fatalf("rlctl request replay/0 checkpoint: %d %s", code, out)
	}
	if files, _ := filepath.Glob(ckpts); len(files) == 0 {
		t.Fatalf("no replay checkpoint after the checkpoint command")
	}
	for _, name := range []string{"replay/0", "trainer/0"} {
		if err := syscall.Kill(rec.Workers[name], syscall.SIGKILL); err != nil {
			t.Fatalf("kill %s: %v", name, err)
		}
	}
	waitOutput(t, p, regexp.MustCompile(`replay/0 restarted`), 60*time.Second)
	waitOutput(t, p, regexp.MustCompile(`trainer/0 restarted`), 60*time.Second)
	if code := p.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	if out := readFile(t, p.log); !strings.Contains(out, "reached the target 300") {
		t.Fatalf("the run did not stop at its target return:\n%s", out)
	}
	if log := readFile(t, filepath.Join(dir, "logs", "replay-0.log")); !strings.Contains(log, "replay: table resumed") {
		t.Errorf("the restarted replay worker did not resume its table:\n%s", log)
	}
	if log := readFile(t, filepath.Join(dir, "logs", "trainer-0.log")); !strings.Contains(log, "trainer: resumed from checkpoint") {
		t.Errorf("the restarted trainer did not resume from its checkpoint:\n%s", log)
	}
	lines := readMetricsLines(t, metrics)
	last := lines[len(lines)-1]
	if last.Restarts != 2 {
		t.Fatalf("last metrics: restarts %d, want 2", last.Restarts)
	}
	// Versions go on from the trainer's checkpoint (every 200 updates), not
	// from 0.
	for _, l := range lines {
		if l.Version != 0 && l.Version < before-300 && l.Time.After(lines[0].Time) && l.Restarts == 2 {
			t.Fatalf("version %d after the restart, %d before the kill: the trainer did not resume", l.Version, before)
		}
	}
	var sawReplay bool
	for _, l := range lines {
		if l.ReplaySize > 0 && l.SamplesPerInsert > 0 {
			sawReplay = true
		}
	}
	if !sawReplay {
		t.Fatal("no metrics line shows the replay's size and samples per insert")
	}
	t.Logf("return %.1f in %.1fs, version %d, %d env steps, replay %d, samples/insert %.2f",
		last.MeanReturn, last.ElapsedS, last.Version, last.EnvSteps, last.ReplaySize, last.SamplesPerInsert)
	assertWorkersGone(t, readRecord(t, dir))
}

// BenchmarkStartCartPole runs the built-in CartPole experiments through
// rlctl start to their target return of 475, one after the other on the
// same machine: wall seconds and environment steps to 475 of Ape-X DQN
// (cartpole-apex) next to PPO (cartpole-ppo), the medians of b.N runs
// (-benchtime 5x: of 5). Metrics lines come every 100 ms, so that the
// time to the target is not rounded up to a coarser interval.
func BenchmarkStartCartPole(b *testing.B) {
	for _, exp := range []string{"cartpole-ppo", "cartpole-apex"} {
		b.Run("experiment="+exp, func(b *testing.B) {
			var wall, steps []float64
			for i := range b.N {
				work := b.TempDir()
				trial := fmt.Sprintf("b%d", i)
				p := start(b, "rlctl-start", noNameServer, "start", exp, trial, "--workdir", work, "--set", "metrics_interval=100ms")
				if code := p.wait(b, 11*time.Minute); code != 0 {
					b.Fatalf("%s exited with %d:\n%s", exp, code, readFile(b, p.log))
				}
				if out := readFile(b, p.log); !strings.Contains(out, "reached the target 475") {
					b.Fatalf("%s did not reach 475:\n%s", exp, out)
				}
				lines := readMetricsLines(b, filepath.Join(work, exp, trial, "metrics.jsonl"))
				last := lines[len(lines)-1]
				b.Logf("%s run %d: %.2f s, %d env steps to 475", exp, i, last.ElapsedS, last.EnvSteps)
				wall = append(wall, last.ElapsedS)
				steps = append(steps, float64(last.EnvSteps))
				os.RemoveAll(work)
			}
			b.ReportMetric(0, "ns/op")
			b.ReportMetric(median(wall), "s-to-475")
			b.ReportMetric(median(steps), "steps-to-475")
		})
	}
}
