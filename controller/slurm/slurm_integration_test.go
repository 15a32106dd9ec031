package slurm

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/internal/testsupport/slurmtest"
	"github.com/distrl/distrl/nameresolve/names"
)

func TestMain(m *testing.M) {
	code := m.Run()
	slurmtest.TearDown()
	os.Exit(code)
}

// slurmWorker stands in for rlctl on the nodes: it says where it runs,
// and exits 0 on SIGTERM (as a worker does when interrupted).
const slurmWorker = `#!/bin/sh
echo "args: $*"
echo "password: $RLCTL_NAMERESOLVE_PASSWORD"
echo "node: $SLURMD_NODENAME"
trap 'echo "TERM"; exit 0' TERM
while :; do sleep 0.1; done
`

func newTestSlurm(t *testing.T, c *slurmtest.Cluster, opts Options) (*Scheduler, controller.TrialDir) {
	t.Helper()
	dir := controller.TrialDir(t.TempDir())
	exe := filepath.Join(string(dir), "fake-rlctl")
	if err := os.WriteFile(exe, []byte(slurmWorker), 0o755); err != nil {
		t.Fatal(err)
	}
	opts.Executable, opts.Env, opts.Poll = exe, c.Env(), 200*time.Millisecond
	s, err := New(opts, dir, names.NewTrial("slurmtest", strings.ReplaceAll(t.Name(), "/", "-")))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = s.StopAll(ctx)
	})
	return s, dir
}

// waitLog waits until a worker's log holds want.
func waitLog(t *testing.T, path, want string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), want) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in %q", path, want, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func waitDone(t *testing.T, h controller.Handle) error {
	t.Helper()
	select {
	case <-h.Done():
		return h.Wait()
	case <-time.After(30 * time.Second):
		t.Fatalf("task %v did not end", h)
		return nil
	}
}

// The scheduler against a real 3-node SLURM: one job array per group,
// spread over the nodes; a cancelled task ends its handle with the state;
// a resubmitted index runs again and appends to its log; SIGTERM reaches
// the worker; StopAll leaves nothing in the queue. The spec's environment
// (the name server's password) reaches the tasks, the script never holds it.
func TestSlurmSchedulerOnCluster(t *testing.T) {
	c := slurmtest.Get(t)
	s, dir := newTestSlurm(t, c, Options{})
	ctx := context.Background()
	specs := make([]controller.WorkerSpec, 4)
	for i := range specs {
		name := "echo/" + strconv.Itoa(i)
		specs[i] = controller.WorkerSpec{Type: "echo", Index: i, Name: name, Args: []string{"--ttl", "3s"}, LogPath: dir.Log(name),
			Env: []string{controller.EnvNameResolvePassword + "=s3cret pw"}}
	}
	hs, err := s.StartGroup(ctx, specs)
	if err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for i := range specs {
		log := waitLog(t, specs[i].LogPath, "node: node")
		if !strings.Contains(log, "args: worker --type echo --index "+strconv.Itoa(i)+" --ttl 3s") ||
			!strings.Contains(log, "password: s3cret pw\n") {
			t.Errorf("log of %s: %q", specs[i].Name, log)
		}
		nodes[strings.TrimSpace(log[strings.Index(log, "node: ")+6:])] = true
	}
	if len(nodes) < 2 {
		t.Errorf("4 tasks ran on %d nodes: %v", len(nodes), nodes)
	}
	jobs, err := os.ReadFile(dir.Path(Dir, JobsFile))
	if err != nil || !strings.HasPrefix(string(jobs), s.Jobs()[0]+" echo") {
		t.Errorf("jobs.txt: %q, %v (jobs %v)", jobs, err, s.Jobs())
	}

	// Cancelled: the handle ends with the task's state.
	if err := hs[1].Kill(); err != nil {
		t.Fatal(err)
	}
	var te *TaskError
	if err := waitDone(t, hs[1]); !errors.As(err, &te) || te.State != "CANCELLED" {
		t.Errorf("cancelled task ended with %v", err)
	}
	// Resubmitted: the one index runs again, appending to its log.
	h, err := s.Start(ctx, specs[1])
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for strings.Count(waitLog(t, specs[1].LogPath, "node: "), "node: ") < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the resubmitted task did not run")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if log := waitLog(t, specs[1].LogPath, "node: "); strings.Count(log, "password: s3cret pw\n") != 2 {
		t.Errorf("the resubmitted task did not get the password:\n%s", log)
	}
	if script := readTestFile(t, s.ScriptPath("echo")); strings.Contains(script, "s3cret") {
		t.Errorf("the script holds the password:\n%s", script)
	}
	// SIGTERM reaches the worker, which exits 0: the task completed.
	if err := h.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := waitDone(t, h); err != nil {
		t.Errorf("task ended by SIGTERM: %v, want completed", err)
	}
	waitLog(t, specs[1].LogPath, "TERM")

	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.StopAll(sctx); err != nil {
		t.Fatal(err)
	}
	for i, h := range hs {
		select {
		case <-h.Done():
		default:
			t.Errorf("task %d still running after StopAll", i)
		}
	}
	out, err := c.Command("squeue", "-h", "--name="+s.JobName("echo")).Output()
	if err != nil || strings.TrimSpace(string(out)) != "" {
		t.Errorf("squeue after StopAll: %q, %v", out, err)
	}
}

// What SLURM would refuse is found before anything is submitted.
func TestSlurmCheck(t *testing.T) {
	c := slurmtest.Get(t)
	cfg := testConfig(t)
	for _, tt := range []struct {
		name string
		opts Options
		path string // PATH, "" to keep it
		want string
	}{
		{"ok", Options{Partition: "debug"}, "", ""},
		{"no sbatch", Options{}, t.TempDir(), "no sbatch on PATH"},
		{"no partition", Options{Partition: "nosuch"}, "", `partition "nosuch" does not exist`},
		{"bad option", Options{SbatchArgs: []string{"--mem=99999999G"}}, "", "sbatch refuses the echo workers' script"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.path != "" {
				t.Setenv("PATH", tt.path)
			}
			s, dir := newTestSlurm(t, c, tt.opts)
			err := s.Check(context.Background(), controller.Options{Config: cfg, Dir: dir, Trial: "t", NameResolve: []string{"10.0.0.1:2379"}})
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("Check: %v", err)
			case tt.want != "" && (!errors.Is(err, ErrSlurm) || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("Check: %v, want ErrSlurm with %q", err, tt.want)
			}
			if len(s.Jobs()) != 0 {
				t.Errorf("Check submitted %v", s.Jobs())
			}
		})
	}
}

// testConfig is echo-64 with 4 workers.
func testConfig(t *testing.T) *experiment.Config {
	t.Helper()
	cfg, err := experiment.Builtin("echo-64")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Set("workers.echo.count=4"); err != nil {
		t.Fatal(err)
	}
	return cfg
}
