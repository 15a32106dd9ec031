package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/internal/testsupport/eventually"
)

// With --curve-keys every socket of the trial speaks CURVE (control plane,
// inference, samples, replay, parameters): PPO still learns and Ape-X's
// trainer still samples its replay and publishes, so every client holds
// the key its server demands. Ape-X runs two DQN trainers as one group,
// whose members talk over CURVE too.
func TestStartWithCurveKeys(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	if out, code := runRlctl(t, nil, "keygen", keys); code != 0 {
		t.Fatalf("keygen: %d %s", code, out)
	}
	t.Run("cartpole-ppo", func(t *testing.T) {
		work := t.TempDir()
		p := start(t, "rlctl-start", noNameServer, "--curve-keys", keys, "start", "cartpole-ppo", "tc", "--workdir", work,
			"--set", "stop.wall_time=4m", "--set", "stop.target_return=200")
		waitOutput(t, p, regexp.MustCompile(`all 4 workers running`), 30*time.Second)
		if code := p.wait(t, 4*time.Minute); code != 0 {
			t.Fatalf("rlctl start with CURVE exited with %d", code)
		}
		waitOutput(t, p, regexp.MustCompile(`reached the target 200`), time.Second)
		assertWorkersGone(t, readRecord(t, filepath.Join(work, "cartpole-ppo", "tc")))
	})
	t.Run("cartpole-apex", func(t *testing.T) {
		work := t.TempDir()
		p := start(t, "rlctl-start", noNameServer, "--curve-keys", keys, "start", "cartpole-apex", "tc", "--workdir", work,
			"--set", "metrics_interval=300ms", "--set", "stop.wall_time=4m", "--set", "workers.trainer.count=2")
		waitOutput(t, p, regexp.MustCompile(`all 8 workers running`), 30*time.Second)
		dir := filepath.Join(work, "cartpole-apex", "tc")
		eventually.NoError(t, 90*time.Second, "the trainer learns from the replay", func() error {
			lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
			if len(lines) == 0 || lines[len(lines)-1].Version < 20 || lines[len(lines)-1].ReplaySize == 0 {
				return fmt.Errorf("%d metrics lines", len(lines))
			}
			return nil
		})
		p.signal(t, syscall.SIGINT)
		if code := p.wait(t, time.Minute); code != 130 {
			t.Fatalf("rlctl start exited with %d after SIGINT", code)
		}
		if log := readFile(t, filepath.Join(dir, "logs", "trainer-1.log")); !strings.Contains(log, "state synchronised from rank 0") {
			t.Errorf("the DQN trainers' group never formed over CURVE:\n%s", tail(log, 30))
		}
		assertWorkersGone(t, readRecord(t, dir))
	})
}
