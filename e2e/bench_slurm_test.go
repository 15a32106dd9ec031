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
	running := regexp.MustCompile(`all 64 workers running after`)
	benchSchedulers(b, "echo-64", []string{"--set", "stop.wall_time=1s"}, "startup-s", func(b *testing.B, p *proc) {
		waitOutput(b, p, running, 2*time.Minute)
	})
}

// BenchmarkSlurmLearnCartPole: wall seconds of `rlctl start cartpole-ppo`
// from the command to its exit at mean return 475 (start-up, learning and
// stop), with the workers as local processes and as job arrays on the
// 3-node cluster; the median of 3 runs each. env-steps/s is the median of
// the runs' average env steps per second (rlctl start's summary): on the
// cluster the actors reach their policy worker over the network.
func BenchmarkSlurmLearnCartPole(b *testing.B) {
	benchSchedulers(b, "cartpole-ppo", nil, "s-to-475", func(b *testing.B, p *proc) {
		if code := p.wait(b, 5*time.Minute); code != 0 {
			b.Fatalf("rlctl start exited with %d:\n%s", code, readFile(b, p.log))
		}
	})
}

// benchSchedulers times 3 runs of `rlctl start experiment` per scheduler,
// each from the command until done returns, and reports their median as
// metric, and the median of the env steps per second of the summaries
// that have some as env-steps/s; every run is then waited for to exit 0.
func benchSchedulers(b *testing.B, experiment string, flags []string, metric string, done func(*testing.B, *proc)) {
	for _, sched := range schedulers {
		b.Run("scheduler="+sched, func(b *testing.B) {
			var secs, rates []float64
			for i := range 3 * b.N {
				s := newSlurmTrial(b, experiment)
				s.trial.Trial += "-" + strconv.Itoa(i)
				args := append([]string{"start", experiment, s.trial.Trial, "--workdir", s.work}, flags...)
				begin := time.Now()
				p := start(b, "rlctl-start", s.env, append(args, s.startFlags(sched)...)...)
				done(b, p)
				secs = append(secs, time.Since(begin).Seconds())
				if code := p.wait(b, time.Minute); code != 0 {
					b.Fatalf("rlctl start exited with %d:\n%s", code, readFile(b, p.log))
				}
				summary := summaryLine.FindString(readFile(b, p.log))
				b.Logf("run %d: %.2fs; %s", i, secs[i], summary)
				if m := averageRate.FindStringSubmatch(summary); m != nil {
					r, _ := strconv.ParseFloat(m[1], 64)
					rates = append(rates, r)
				}
			}
			b.ReportMetric(median(secs), metric)
			if len(rates) > 0 {
				b.ReportMetric(median(rates), "env-steps/s")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// summaryLine is the line of rlctl start's summary with the run's figures.
var summaryLine = regexp.MustCompile(`ran \S+ \(start-up \S+\).*`)

// averageRate is the summary's env steps per second.
var averageRate = regexp.MustCompile(`env steps \((\d+)/s on average\)`)

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	return v[len(v)/2]
}
