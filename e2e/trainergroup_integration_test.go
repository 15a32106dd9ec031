package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cartpole-ppo with two trainers learning as one data-parallel group
// (issue 37's chaos bar): rank 0, the member that publishes and
// checkpoints, is killed with SIGKILL mid-run; the controller restarts it,
// the surviving member notices, the group forms again from the restarted
// rank 0's checkpoint, and the trial still reaches its target. The logs
// and metrics say so.
func TestStartTrainerGroupSurvivesKill(t *testing.T) {
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "start", "cartpole-ppo", "tg", "--workdir", work,
		"--set", "workers.trainer.count=2",
		"--set", "metrics_interval=300ms", "--set", "stop.wall_time=5m",
		"--set", "workers.trainer.config.checkpoint_every=1",
		// As TestStartCartPolePPOSurvivesKills: a target that takes learning
		// (a random policy scores about 20) and keeps the run short under
		// -race.
		"--set", "stop.target_return=200")
	waitOutput(t, p, regexp.MustCompile(`all 5 workers running`), 30*time.Second)
	dir := filepath.Join(work, "cartpole-ppo", "tg")
	metrics := filepath.Join(dir, "metrics.jsonl")
	waitCheckpoint(t, dir, 3) // rank 0 checkpoints for the group
	if err := syscall.Kill(readRecord(t, dir).Workers["trainer/0"], syscall.SIGKILL); err != nil {
		t.Fatalf("kill trainer/0: %v", err)
	}
	waitOutput(t, p, regexp.MustCompile(`trainer/0 restarted`), 60*time.Second)
	if code := p.wait(t, 5*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	if out := readFile(t, p.log); !strings.Contains(out, "reached the target 200") {
		t.Fatalf("the run did not stop at its target return:\n%s", out)
	}

	// The survivor saw the group break and form again, and both members
	// synchronised from rank 0 at the new formation.
	survivor := readFile(t, filepath.Join(dir, "logs", "trainer-1.log"))
	for _, want := range []string{"collective: group broken", "state synchronised from rank 0"} {
		if !strings.Contains(survivor, want) {
			t.Errorf("trainer/1's log has no %q:\n%s", want, tail(survivor, 40))
		}
	}
	if n := strings.Count(survivor, "group formed; state synchronised"); n < 2 {
		t.Errorf("trainer/1 synchronised %d times, want the start and after the restart", n)
	}
	restarted := readFile(t, filepath.Join(dir, "logs", "trainer-0.log"))
	if !strings.Contains(restarted, "resumed from checkpoint") {
		t.Errorf("the restarted rank 0 did not resume from its checkpoint:\n%s", tail(restarted, 40))
	}
	lines := readMetricsLines(t, metrics)
	last := lines[len(lines)-1]
	if last.Restarts != 1 {
		t.Errorf("last metrics: restarts %d, want 1", last.Restarts)
	}
	var reforms float64
	for _, l := range lines {
		if r, ok := l.Workers["trainer/1"]["group_reforms"].(float64); ok {
			reforms = max(reforms, r)
		}
	}
	if reforms < 1 {
		t.Errorf("trainer/1's group_reforms never rose above %v in metrics.jsonl", reforms)
	}
	// Versions go on from rank 0's checkpoint: with checkpoint_every 1 at
	// most the update in flight is lost.
	var highest int64
	for _, l := range lines {
		if l.Version == 0 {
			continue
		}
		if l.Version < highest-1 {
			t.Fatalf("version fell from %d to %d: the group did not resume from rank 0's checkpoint", highest, l.Version)
		}
		highest = max(highest, l.Version)
	}
	t.Logf("reached %.1f with a group of 2 and rank 0 killed once in %.1fs, version %d, %d env steps", last.MeanReturn, last.ElapsedS, last.Version, last.EnvSteps)
	assertWorkersGone(t, readRecord(t, dir))
}

// tail is the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
