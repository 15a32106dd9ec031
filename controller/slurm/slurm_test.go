package slurm

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/nameresolve/etcd"
)

func TestSlurmResources(t *testing.T) {
	for _, tt := range []struct {
		in   experiment.Resources
		want []string
	}{
		{experiment.Resources{}, nil},
		{experiment.Resources{CPUs: 0.5}, []string{"--cpus-per-task=1"}},
		{experiment.Resources{CPUs: 2.5, Memory: "512Mi"}, []string{"--cpus-per-task=3", "--mem=512M"}},
		{experiment.Resources{Memory: "1G"}, []string{"--mem=954M"}}, // 1e9 bytes, rounded up to MiB
		{experiment.Resources{Memory: "2Gi", GPUs: 2}, []string{"--mem=2048M", "--gres=gpu:2"}},
	} {
		if got := resources(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("resources(%+v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSlurmScript(t *testing.T) {
	dir := controller.TrialDir("/shared/trials/exp/t1")
	s, err := New(Options{Executable: "/opt/distrl/rlctl", Partition: "gpu", Account: "rl", Time: "1:00:00",
		SbatchArgs: []string{"--qos=high"}}, dir, names.NewTrial("exp", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	spec := controller.WorkerSpec{Type: "actor", Index: 0, Name: "actor/0", Args: []string{"--nameresolve", "10.0.0.1:2379", "--log-level", "it's"},
		Resources: experiment.Resources{CPUs: 1, Memory: "256Mi"}}
	got := s.Script(spec, 8)
	for _, want := range []string{
		"#!/bin/sh\n",
		"#SBATCH --job-name=distrl.exp.t1.actor\n",
		"#SBATCH --array=0-7\n",
		"#SBATCH --output=/shared/trials/exp/t1/logs/actor-%a.log\n",
		"#SBATCH --cpus-per-task=1\n#SBATCH --mem=256M\n",
		"#SBATCH --partition=gpu\n#SBATCH --account=rl\n#SBATCH --time=1:00:00\n#SBATCH --qos=high\n",
		`exec /opt/distrl/rlctl worker --type actor --index "$SLURM_ARRAY_TASK_ID" --nameresolve 10.0.0.1:2379 --log-level 'it'\''s'` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
	if s.ScriptPath("actor") != "/shared/trials/exp/t1/slurm/actor.sbatch" {
		t.Errorf("script path %s", s.ScriptPath("actor"))
	}
}

// A group of 10 workers, 4 per process, is an array of 3 tasks; each task
// works out its first index, count and log from SLURM_ARRAY_TASK_ID.
func TestSlurmScriptHosted(t *testing.T) {
	dir := controller.TrialDir("/shared/trials/exp/t1")
	s, err := New(Options{Executable: "/opt/distrl/rlctl"}, dir, names.NewTrial("exp", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	specs := controller.ProcessSpecs("echo", "echo", experiment.Group{Count: 10, PerProcess: 4}, dir, []string{"--ttl", "3s"}, nil, "")
	got := s.Script(specs[0], groupWorkers(specs))
	for _, want := range []string{
		"#SBATCH --array=0-2\n",
		"#SBATCH --output=/shared/trials/exp/t1/logs/echo-task-%a.log\n",
		`exec /opt/distrl/rlctl worker --type echo --index "$first" --count "$count" --ttl 3s >>/shared/trials/exp/t1/logs/echo-"$first-$last.log" 2>&1` + "\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
	// Run the script with exec replaced by an echo of what it would run.
	script := strings.Replace(got, "exec ", "echo ", 1)
	script = strings.Replace(script, " >>", " LOG=", 1)
	script = strings.Replace(script, " 2>&1", "", 1)
	for _, spec := range specs {
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(cmd.Environ(), "SLURM_ARRAY_TASK_ID="+strconv.Itoa(spec.Task()))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("task %d: %v: %s", spec.Task(), err, out)
		}
		want := fmt.Sprintf("/opt/distrl/rlctl worker --type echo --index %d --count %d --ttl 3s LOG=%s\n", spec.Index, spec.Count, spec.LogPath)
		if string(out) != want {
			t.Errorf("task %d runs\n  %s want\n  %s", spec.Task(), out, want)
		}
	}
	// A group of a process per worker keeps the index as the task.
	one := controller.ProcessSpecs("echo", "echo", experiment.Group{Count: 3}, dir, nil, nil, "")
	if got := s.Script(one[0], groupWorkers(one)); !strings.Contains(got, "#SBATCH --array=0-2\n") ||
		!strings.Contains(got, `--index "$SLURM_ARRAY_TASK_ID"`) || strings.Contains(got, "--count") {
		t.Errorf("script of one worker per process:\n%s", got)
	}
}

// A group on a CUDA device runs the CUDA binary and asks for its GPU.
func TestSlurmScriptCUDA(t *testing.T) {
	dir := controller.TrialDir("/shared/trials/exp/t1")
	s, err := New(Options{Executable: "/opt/distrl/rlctl"}, dir, names.NewTrial("exp", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	g := experiment.Group{Count: 1, Resources: experiment.Resources{GPUs: 1}, Config: map[string]any{"device": "cuda:0"}}
	specs := controller.ProcessSpecs("policy", "policy", g, dir, nil, nil, "/opt/distrl/rlctl-cuda")
	got := s.Script(specs[0], groupWorkers(specs))
	for _, want := range []string{"#SBATCH --gres=gpu:1\n", `exec /opt/distrl/rlctl-cuda worker --type policy`} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
}

// A group named apart from its type runs its workers under the group's
// name: --group in the command, the group's script, job and logs.
func TestSlurmScriptNamedGroup(t *testing.T) {
	dir := controller.TrialDir("/shared/trials/exp/t1")
	s, err := New(Options{Executable: "/opt/distrl/rlctl"}, dir, names.NewTrial("exp", "t1"))
	if err != nil {
		t.Fatal(err)
	}
	specs := controller.ProcessSpecs("policy-red", "policy", experiment.Group{Count: 2}, dir, nil, nil, "")
	got := s.Script(specs[0], groupWorkers(specs))
	for _, want := range []string{
		`exec /opt/distrl/rlctl worker --type policy --group policy-red --index "$SLURM_ARRAY_TASK_ID"`,
		"--job-name=" + s.JobName("policy-red"), "/shared/trials/exp/t1/logs/policy-red-%a.log", s.ScriptPath("policy-red"),
	} {
		if !strings.Contains(got, want) {
			t.Errorf("script lacks %q:\n%s", want, got)
		}
	}
	if specs[1].Workers[0] != "policy-red/1" || specs[1].GroupName() != "policy-red" {
		t.Errorf("second process: %+v", specs[1])
	}
}

// A shared etcd's password reaches the workers in their environment only:
// never in a SLURM script, which any user of the cluster may read.
func TestSlurmScriptKeepsThePasswordOut(t *testing.T) {
	cfg, err := experiment.Builtin("echo-64")
	if err != nil {
		t.Fatal(err)
	}
	const password = "pw:with colon"
	opts := controller.Options{Config: cfg, Trial: "t1", Dir: controller.TrialDir(t.TempDir()), NameResolve: []string{"https://10.0.0.1:2379"},
		NameResolveSecurity: etcd.Security{CACert: "/pki/ca.pem", User: "distrl:" + password}, RemoteWorkers: true}
	s, err := New(Options{Executable: "/opt/rlctl"}, opts.Dir, names.NewTrial(cfg.Name, "t1"))
	if err != nil {
		t.Fatal(err)
	}
	groups := controller.PlanGroups(opts)
	if len(groups) == 0 {
		t.Fatal("no groups")
	}
	for _, specs := range groups {
		script := s.Script(specs[0], groupWorkers(specs))
		if !strings.Contains(script, "--nameresolve-user distrl") || strings.Contains(script, password) {
			t.Errorf("%s: want the user and not the password in the script:\n%s", specs[0].Name, script)
		}
	}
}
