package e2e

import (
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"
)

// schedulers are the two ways `rlctl start` runs workers, compared by the
// SLURM benchmarks in the same run, against the same name server (on the
// host side of the test cluster's bridge) so that only the scheduler differs.
var schedulers = []string{"local", "slurm"}

// startFlags are the flags that make `rlctl start` use scheduler.
func (s *slurmTrial) startFlags(scheduler string) []string {
	if scheduler == "local" {
		return []string{"--scheduler", "local", "--host", "127.0.0.1"}
	}
	return []string{"--scheduler", "slurm"}
}

// BenchmarkSlurmStartupEcho: seconds from `rlctl start` to every one of 64
// echo workers RUNNING, as 64 child processes (local) and as one job array
// of 64 tasks on the 3-node cluster (slurm); the median of 3 starts each.
func BenchmarkSlurmStartupEcho(b *testing.B) {
	for _, sched := range schedulers {
		b.Run("scheduler="+sched, func(b *testing.B) {
			var secs []float64
			for i := range 3 * b.N {
				s := newSlurmTrial(b, "echo-64")
				s.trial.Trial += "-" + strconv.Itoa(i)
				begin := time.Now()
				p := start(b, "rlctl-start", s.env, append([]string{"start", "echo-64", s.trial.Trial, "--workdir", s.work,
					"--set", "stop.wall_time=1s"}, s.startFlags(sched)...)...)
				waitOutput(b, p, regexp.MustCompile(`all 64 workers running after`), 2*time.Minute)
				secs = append(secs, time.Since(begin).Seconds())
				if code := p.wait(b, time.Minute); code != 0 {
					b.Fatalf("rlctl start exited with %d:\n%s", code, readFile(b, p.log))
				}
			}
			b.ReportMetric(median(secs), "startup-s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkSlurmLearnCartPole: wall seconds of `rlctl start cartpole-ppo`
// from the command to its exit at mean return 475 (start-up, learning and
// stop), with the workers as local processes and as job arrays on the
// 3-node cluster; the median of 3 runs each.
func BenchmarkSlurmLearnCartPole(b *testing.B) {
	for _, sched := range schedulers {
		b.Run("scheduler="+sched, func(b *testing.B) {
			var secs []float64
			for i := range 3 * b.N {
				s := newSlurmTrial(b, "cartpole-ppo")
				s.trial.Trial += "-" + strconv.Itoa(i)
				begin := time.Now()
				p := start(b, "rlctl-start", s.env, append([]string{"start", "cartpole-ppo", s.trial.Trial, "--workdir", s.work},
					s.startFlags(sched)...)...)
				if code := p.wait(b, 5*time.Minute); code != 0 {
					b.Fatalf("rlctl start exited with %d:\n%s", code, readFile(b, p.log))
				}
				secs = append(secs, time.Since(begin).Seconds())
				b.Logf("run %d: %.2fs; %s", i, secs[i], summaryLine.FindString(readFile(b, p.log)))
			}
			b.ReportMetric(median(secs), "s-to-475")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// summaryLine is the line of rlctl start's summary with the run's figures.
var summaryLine = regexp.MustCompile(`ran \S+ \(start-up \S+\).*`)

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
