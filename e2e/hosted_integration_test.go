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
	"github.com/distrl/distrl/nameresolve/names"
)

// rlctl start with workers.echo.per_process: 12 echo workers in 3 host
// processes of 4 reach RUNNING; a SIGKILL of one host restarts its 4
// workers together (one restart, one new process); the trial completes at
// its wall time and leaves no process and no record.
func TestStartHostedWorkers(t *testing.T) {
	c := newCluster(t)
	work := t.TempDir()
	const exp = "echo-64"
	env := []string{"RLCTL_NAMERESOLVE=" + c.endpoint}
	p := start(t, "rlctl-start", env, "start", exp, c.trial.Trial, "--workdir", work,
		"--set", "workers.echo.count=12", "--set", "workers.echo.per_process=4",
		"--set", "stop.wall_time=25s", "--set", "metrics_interval=300ms")
	waitOutput(t, p, regexp.MustCompile(`started 12 workers in 3 processes`), 30*time.Second)
	waitOutput(t, p, regexp.MustCompile(`all 12 workers running`), 60*time.Second)
	dir := filepath.Join(work, exp, c.trial.Trial)

	// Each host's workers share its pid, and its log is named after them.
	hosts := map[string][]int{"echo-0-3": {0, 1, 2, 3}, "echo-4-7": {4, 5, 6, 7}, "echo-8-11": {8, 9, 10, 11}}
	hostPID := func(rec controllerRecord, indices []int) (int, error) {
		pid := rec.Workers[names.WorkerName("echo", indices[0])]
		for _, i := range indices {
			if got := rec.Workers[names.WorkerName("echo", i)]; got != pid || got == 0 {
				return 0, fmt.Errorf("echo/%d has pid %d, echo/%d %d", i, got, indices[0], pid)
			}
		}
		return pid, nil
	}
	rec := readRecord(t, dir)
	if len(rec.Workers) != 12 {
		t.Fatalf("controller.json names %d workers, want 12: %v", len(rec.Workers), rec.Workers)
	}
	pids := map[int]bool{}
	for log, indices := range hosts {
		pid, err := hostPID(rec, indices)
		if err != nil {
			t.Fatal(err)
		}
		pids[pid] = true
		if _, err := os.Stat(filepath.Join(dir, "logs", log+".log")); err != nil {
			t.Errorf("no log of the host %s: %v", log, err)
		}
	}
	if len(pids) != 3 {
		t.Fatalf("%d distinct worker pids, want 3: %v", len(pids), rec.Workers)
	}

	old, _ := hostPID(rec, hosts["echo-4-7"])
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, regexp.MustCompile(`restarting echo/4-7 \(1 of \d+\): `), 30*time.Second)
	waitOutput(t, p, regexp.MustCompile(`echo/4-7 restarted \(pid \d+\)`), 60*time.Second)
	eventually.NoError(t, 20*time.Second, "the restarted workers run", func() error {
		lines := readMetricsLines(t, filepath.Join(dir, "metrics.jsonl"))
		if len(lines) == 0 {
			return fmt.Errorf("no metrics")
		}
		last := lines[len(lines)-1]
		for i := range 12 {
			if st := last.Workers[names.WorkerName("echo", i)]["state"]; st != "RUNNING" {
				return fmt.Errorf("echo/%d is %v", i, st)
			}
		}
		if last.Restarts < 1 {
			return fmt.Errorf("%d restarts, want 1", last.Restarts)
		}
		return nil
	})
	fresh, err := hostPID(readRecord(t, dir), hosts["echo-4-7"])
	if err != nil || fresh == old {
		t.Fatalf("after the restart: pid %d (was %d), %v", fresh, old, err)
	}

	if code := p.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("rlctl start exited with %d:\n%s", code, readFile(t, p.log))
	}
	out := readFile(t, p.log)
	// One restart for the host's four workers (a loaded machine may cost
	// another host its lease: that is not this test's business).
	if n := strings.Count(out, "restarting echo/4-7 "); n != 1 {
		t.Errorf("%d restarts of echo/4-7 in the output, want 1:\n%s", n, out)
	}
	if !strings.Contains(out, "wall time 25s reached") {
		t.Errorf("the trial did not end at its wall time:\n%s", out)
	}
	rec = readRecord(t, dir)
	if rec.State != "completed" {
		t.Errorf("controller.json state %q (%s)", rec.State, rec.Message)
	}
	assertWorkersGone(t, rec)
	if processAlive(old) {
		t.Errorf("the killed host (pid %d) is alive", old)
	}
	c.assertNoRecords(names.NewTrial(exp, c.trial.Trial).Prefix())
}
