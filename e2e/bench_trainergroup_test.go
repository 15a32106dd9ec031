package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// BenchmarkTrainerGroupCartPole: wall seconds of `rlctl start
// cartpole-ppo` (embedded name server, local processes) from the command
// to its exit at mean return 475, with one trainer and with two learning
// as one data-parallel group (workers.trainer.count=2); three runs of
// each, alternating, medians. On 2 cores the second trainer competes with
// the actors and the policy worker for the same cores.
func BenchmarkTrainerGroupCartPole(b *testing.B) {
	secs := map[int][]float64{}
	for round := range 3 {
		for _, n := range []int{1, 2} {
			work := b.TempDir()
			begin := time.Now()
			p := start(b, "rlctl-start", noNameServer, "start", "cartpole-ppo", fmt.Sprintf("g%d-%d", n, round),
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
