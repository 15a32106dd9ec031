package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkTrainerGroupCartPole: wall seconds of `rlctl start
// cartpole-ppo` and `rlctl start cartpole-apex` (embedded name server,
// local processes) from the command to its exit at mean return 475, with
// one trainer and with two learning as one data-parallel group
// (workers.trainer.count=2); runs of each alternating (three of PPO's, one
// of Ape-X's, which takes half a minute or more), medians. On 2 cores the
// second trainer competes with the actors and the policy worker for the
// same cores.
func BenchmarkTrainerGroupCartPole(b *testing.B) {
	for _, exp := range []struct {
		name   string
		rounds int
	}{{"cartpole-ppo", 3}, {"cartpole-apex", 1}} {
		b.Run(exp.name, func(b *testing.B) { benchTrainerGroup(b, exp.name, exp.rounds) })
	}
}

func benchTrainerGroup(b *testing.B, experiment string, rounds int) {
	secs := map[int][]float64{}
	for round := range rounds {
		for _, n := range []int{1, 2} {
			work := b.TempDir()
			begin := time.Now()
			p := start(b, "rlctl-start", noNameServer, "start", experiment, fmt.Sprintf("g%d-%d", n, round),
				"--workdir", work, "--set", fmt.Sprintf("workers.trainer.count=%d", n))
			if code := p.wait(b, 5*time.Minute); code != 0 {
				b.Fatalf("rlctl start exited with %d:\n%s", code, readFile(b, p.log))
			}
			secs[n] = append(secs[n], time.Since(begin).Seconds())
			out := readFile(b, p.log)
			if !strings.Contains(out, "reached the target 475") {
				b.Fatalf("trainers=%d: the run did not reach 475:\n%s", n, out)
			}
			b.Logf("trainers=%d run %d: %.2fs; %s", n, round, secs[n][round], summaryLine.FindString(out))
		}
	}
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("trainers=%d", n), func(b *testing.B) {
			b.ReportMetric(median(secs[n]), "s-to-475")
			b.ReportMetric(0, "ns/op")
		})
	}
}
