package e2e

import (
	"path/filepath"
	"regexp"
	"testing"
	"time"
)

// With --curve-keys every socket of the trial speaks CURVE (control plane,
// inference, samples, parameters): PPO still learns, so every client
// holds the key its server demands.
func TestStartWithCurveKeys(t *testing.T) {
	keys := filepath.Join(t.TempDir(), "keys.json")
	if out, code := runRlctl(t, nil, "keygen", keys); code != 0 {
		t.Fatalf("keygen: %d %s", code, out)
	}
	work := t.TempDir()
	p := start(t, "rlctl-start", noNameServer, "--curve-keys", keys, "start", "cartpole-ppo", "tc", "--workdir", work,
		"--set", "stop.wall_time=4m", "--set", "stop.target_return=200")
	waitOutput(t, p, regexp.MustCompile(`all 4 workers running`), 30*time.Second)
	if code := p.wait(t, 4*time.Minute); code != 0 {
		t.Fatalf("rlctl start with CURVE exited with %d", code)
	}
	waitOutput(t, p, regexp.MustCompile(`reached the target 200`), time.Second)
	assertWorkersGone(t, readRecord(t, filepath.Join(work, "cartpole-ppo", "tc")))
}
