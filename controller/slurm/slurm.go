package slurm

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/distrl/distrl/controller"
	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"
)

// Files of a SLURM trial, under the trial directory (on a cluster, a
// shared filesystem).
const (
	Dir      = "slurm"
	JobsFile = "jobs.txt"
)

// DefaultPoll is how often a Slurm scheduler reads squeue.
const DefaultPoll = 500 * time.Millisecond

// ErrSlurm marks a SLURM that cannot take the trial: no sbatch on PATH, no
// such partition, or a request sbatch refuses. Nothing was submitted.
var ErrSlurm = errors.New("slurm")

// Options configure a Slurm scheduler.
type Options struct {
	// Executable is the rlctl binary the nodes run: it must be at the same
	// path on every node (a shared filesystem). os.Executable() when empty.
	Executable string
	// Partition, Account and Time become --partition, --account and --time.
	Partition, Account, Time string
	// SbatchArgs are more sbatch options, one per element ("--qos=high").
	SbatchArgs []string
	// Env is added to the environment of the SLURM commands (SLURM_CONF).
	Env []string
	// Poll is how often squeue is read; DefaultPoll if zero.
	Poll   time.Duration
	Logger *slog.Logger
}

// Slurm runs every worker group as a SLURM job array: one sbatch script
// per group in the trial directory's slurm/, whose task i runs
// `rlctl worker --type T --index i` (with per_process P, task i hosts
// `--index i*P --count P`, the last task the remainder). Each task is a controller.Handle tracked through
// squeue (never sacct: a cluster may have no accounting daemon). A restart
// resubmits the script for the one index. StopAll cancels every job of the
// trial, those submitted by hand from its scripts too (they share its job
// names), and waits until squeue shows none.
type Scheduler struct {
	opts  Options
	dir   controller.TrialDir
	trial names.Trial
	user  string

	mu      sync.Mutex
	tasks   map[taskKey]*task // not yet seen to end
	jobs    []string          // every job id submitted, in order
	types   map[string]bool   // worker types submitted
	polling bool
}

type taskKey struct {
	job   string // the array's job id
	index int
}

var _ controller.GroupScheduler = (*Scheduler)(nil)

// New returns a scheduler for the trial in dir.
func New(opts Options, dir controller.TrialDir, trial names.Trial) (*Scheduler, error) {
	if opts.Executable == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("controller: slurm scheduler: find rlctl: %w", err)
		}
		opts.Executable = exe
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	u, err := user.Current()
	if err != nil {
		return nil, fmt.Errorf("controller: slurm scheduler: %w", err)
	}
	return &Scheduler{opts: opts, dir: dir, trial: trial, user: u.Username, tasks: map[taskKey]*task{}, types: map[string]bool{}}, nil
}

// JobName is the SLURM job name of a worker group of the trial.
func (s *Scheduler) JobName(typ string) string {
	return "distrl." + s.trial.Experiment + "." + s.trial.Trial + "." + typ
}

// ScriptPath is where the sbatch script of a worker group is written.
func (s *Scheduler) ScriptPath(typ string) string { return s.dir.Path(Dir, typ+".sbatch") }

// Script is the sbatch script of one worker group of workers workers:
// a job array with a task per process. SLURM_ARRAY_TASK_ID is the worker
// index, or with spec.PerProcess > 1 the process's: task k hosts the
// workers from k*PerProcess, the last task the remainder, and writes its
// log where the local scheduler would (logs/{type}-{first}-{last}.log).
func (s *Scheduler) Script(spec controller.WorkerSpec, workers int) string {
	per := max(spec.PerProcess, 1)
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	if per == 1 {
		fmt.Fprintf(&b, "# distrl %s/%s: the %s workers, one job array task each (written by rlctl start).\n",
			s.trial.Experiment, s.trial.Trial, spec.GroupName())
		fmt.Fprintf(&b, "# Run one more by hand: sbatch --array=INDEX %s\n", s.ScriptPath(spec.GroupName()))
	} else {
		fmt.Fprintf(&b, "# distrl %s/%s: the %d %s workers, %d per job array task (written by rlctl start).\n",
			s.trial.Experiment, s.trial.Trial, workers, spec.GroupName(), per)
		fmt.Fprintf(&b, "# Run one task again by hand: sbatch --array=TASK %s (task k hosts the workers from k*%d)\n",
			s.ScriptPath(spec.GroupName()), per)
	}
	for _, d := range s.directives(spec, workers) {
		fmt.Fprintf(&b, "#SBATCH %s\n", d)
	}
	index, redirect := `"$SLURM_ARRAY_TASK_ID"`, ""
	if per > 1 {
		fmt.Fprintf(&b, "first=$((SLURM_ARRAY_TASK_ID * %d))\n", per)
		fmt.Fprintf(&b, "count=$((%d - first))\n", workers)
		fmt.Fprintf(&b, "if [ \"$count\" -gt %d ]; then count=%d; fi\n", per, per)
		b.WriteString("last=$((first + count - 1))\n")
		index = `"$first" --count "$count"`
		redirect = ` >>` + shellQuote(s.dir.Path(controller.LogsDir, spec.GroupName()+"-")) + `"$first-$last.log" 2>&1`
	}
	args := append([]string{cmp.Or(spec.Executable, s.opts.Executable), "worker"}, spec.TypeArgs()...)
	args = append(append(args, "--index"), spec.Args...)
	for i, a := range args {
		args[i] = shellQuote(a)
	}
	args = slices.Insert(args, 3+len(spec.TypeArgs()), index)
	// exec: the worker is the batch step itself, so `scancel --batch
	// --signal=TERM` reaches it and it exits gracefully.
	fmt.Fprintf(&b, "exec %s%s\n", strings.Join(args, " "), redirect)
	return b.String()
}

// groupWorkers is how many workers the processes of specs host.
func groupWorkers(specs []controller.WorkerSpec) int {
	n := 0
	for _, spec := range specs {
		n += spec.Hosts()
	}
	return n
}

func (s *Scheduler) directives(spec controller.WorkerSpec, workers int) []string {
	per := max(spec.PerProcess, 1)
	// %a: the task index, so the log is the local scheduler's logs/{type}-{index}.log;
	// a host's task writes its own log, and SLURM's output says only what
	// went wrong before the worker ran.
	output := s.dir.Path(controller.LogsDir, spec.GroupName()+"-%a.log")
	if per > 1 {
		output = s.dir.Path(controller.LogsDir, spec.GroupName()+"-task-%a.log")
	}
	d := []string{
		"--job-name=" + s.JobName(spec.GroupName()),
		fmt.Sprintf("--array=0-%d", max((workers+per-1)/per-1, 0)),
		"--output=" + output,
		"--open-mode=append", // a resubmitted task appends, as a restarted local worker does
		"--ntasks=1",
		"--nodes=1",
	}
	d = append(d, resources(spec.Resources)...)
	if s.opts.Partition != "" {
		d = append(d, "--partition="+s.opts.Partition)
	}
	if s.opts.Account != "" {
		d = append(d, "--account="+s.opts.Account)
	}
	if s.opts.Time != "" {
		d = append(d, "--time="+s.opts.Time)
	}
	return append(d, s.opts.SbatchArgs...)
}

// resources turns a worker's resources into sbatch options.
func resources(r experiment.Resources) []string {
	var d []string
	if r.CPUs > 0 {
		d = append(d, fmt.Sprintf("--cpus-per-task=%d", int(math.Ceil(r.CPUs))))
	}
	if r.Memory != "" {
		if n, err := experiment.ParseQuantity(r.Memory); err == nil && n > 0 {
			d = append(d, fmt.Sprintf("--mem=%dM", (n+(1<<20)-1)>>20))
		}
	}
	if r.GPUs > 0 {
		d = append(d, fmt.Sprintf("--gres=gpu:%d", r.GPUs))
	}
	return d
}

// shellQuote quotes a word for sh where it needs it.
func shellQuote(s string) string {
	if s != "" && strings.IndexFunc(s, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=,@%+", r))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Check asks SLURM whether it would take the scripts of opts's trial,
// without submitting anything: sbatch must be on PATH, the partition must
// exist, and `sbatch --test-only` must accept every group's options.
func (s *Scheduler) Check(ctx context.Context, opts controller.Options) error {
	groups := controller.PlanGroups(opts)
	if _, err := exec.LookPath("sbatch"); err != nil {
		return fmt.Errorf("%w: no sbatch on PATH: --scheduler slurm runs on a SLURM login node (%w)", ErrSlurm, err)
	}
	if s.opts.Partition != "" {
		out, err := s.command(ctx, "sinfo", "-h", "-o", "%P", "--partition="+s.opts.Partition).Output()
		if err != nil {
			return fmt.Errorf("%w: sinfo: %s", ErrSlurm, cmdError(err))
		}
		if strings.TrimSpace(string(out)) == "" {
			return fmt.Errorf("%w: partition %q does not exist (sinfo lists the partitions)", ErrSlurm, s.opts.Partition)
		}
	}
	for _, specs := range groups {
		if len(specs) == 0 {
			continue
		}
		cmd := s.command(ctx, "sbatch", "--test-only")
		cmd.Stdin = strings.NewReader(s.Script(specs[0], groupWorkers(specs)))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%w: sbatch refuses the %s workers' script: %s", ErrSlurm, specs[0].Type, oneLine(out, err))
		}
	}
	return nil
}

// WriteScripts writes every group's script and returns their paths (--dry-run).
func (s *Scheduler) WriteScripts(groups [][]controller.WorkerSpec) ([]string, error) {
	var paths []string
	for _, specs := range groups {
		if len(specs) == 0 {
			continue
		}
		p, err := s.writeScript(specs[0], groupWorkers(specs))
		if err != nil {
			return paths, err
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func (s *Scheduler) writeScript(spec controller.WorkerSpec, workers int) (string, error) {
	p := s.ScriptPath(spec.GroupName())
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", fmt.Errorf("controller: slurm script: %w", err)
	}
	if err := os.MkdirAll(s.dir.Path(controller.LogsDir), 0o755); err != nil {
		return "", fmt.Errorf("controller: slurm script: %w", err)
	}
	if err := os.WriteFile(p, []byte(s.Script(spec, workers)), 0o755); err != nil {
		return "", fmt.Errorf("controller: slurm script: %w", err)
	}
	return p, nil
}

// StartGroup writes the group's script and submits it as one job array.
func (s *Scheduler) StartGroup(ctx context.Context, specs []controller.WorkerSpec) ([]controller.Handle, error) {
	if len(specs) == 0 {
		return nil, nil
	}
	for i, spec := range specs {
		if spec.Task() != i || spec.Index%max(spec.PerProcess, 1) != 0 || spec.GroupName() != specs[0].GroupName() || spec.PerProcess != specs[0].PerProcess {
			return nil, fmt.Errorf("controller: slurm: a group must be one group's processes in order from index 0 (got %s at %d)", spec.Name, i)
		}
	}
	path, err := s.writeScript(specs[0], groupWorkers(specs))
	if err != nil {
		return nil, err
	}
	job, err := s.submit(ctx, specs[0].GroupName(), path, specs[0].Env)
	if err != nil {
		return nil, err
	}
	hs := make([]controller.Handle, len(specs))
	for i, spec := range specs {
		hs[i] = s.track(job, spec)
	}
	return hs, nil
}

// Start submits the script of spec's group for the one process's task (a
// restart).
func (s *Scheduler) Start(ctx context.Context, spec controller.WorkerSpec) (controller.Handle, error) {
	path := s.ScriptPath(spec.GroupName())
	if _, err := os.Stat(path); err != nil {
		if path, err = s.writeScript(spec, spec.Index+spec.Hosts()); err != nil {
			return nil, err
		}
	}
	job, err := s.submit(ctx, spec.GroupName(), path, spec.Env, "--array="+strconv.Itoa(spec.Task()))
	if err != nil {
		return nil, err
	}
	return s.track(job, spec), nil
}

// submit runs sbatch and records the job id in slurm/jobs.txt. env is
// added to sbatch's environment, which sbatch hands to the job (its
// default --export=ALL): the way a secret reaches a worker without being
// written into its script.
func (s *Scheduler) submit(ctx context.Context, typ, script string, env []string, extra ...string) (string, error) {
	args := append(append([]string{"--parsable"}, extra...), script)
	cmd := s.command(ctx, "sbatch", args...)
	if len(env) > 0 {
		cmd.Env = append(cmd.Environ(), env...)
	}
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("controller: sbatch %s: %s", script, cmdError(err))
	}
	job, _, _ := strings.Cut(strings.TrimSpace(string(out)), ";") // "ID" or "ID;CLUSTER"
	if _, err := strconv.ParseUint(job, 10, 64); err != nil {
		return "", fmt.Errorf("controller: sbatch %s printed %q, not a job id", script, out)
	}
	s.mu.Lock()
	s.jobs = append(s.jobs, job)
	s.types[typ] = true
	s.mu.Unlock()
	f, err := os.OpenFile(s.dir.Path(Dir, JobsFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		fmt.Fprintf(f, "%s %s %s %s\n", job, typ, strings.Join(extra, " "), time.Now().Format(time.RFC3339))
		err = f.Close()
	}
	if err != nil {
		s.opts.Logger.Warn("job id not recorded", "job", job, "err", err)
	}
	return job, nil
}

// Jobs returns the ids of every job this scheduler submitted.
func (s *Scheduler) Jobs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.jobs)
}

func (s *Scheduler) track(job string, spec controller.WorkerSpec) *task {
	t := &task{s: s, key: taskKey{job, spec.Task()}, done: make(chan struct{})}
	s.mu.Lock()
	s.tasks[t.key] = t
	if !s.polling {
		s.polling = true
		go s.poll()
	}
	s.mu.Unlock()
	return t
}

// queueEntry is one array task as squeue shows it.
type queueEntry struct {
	state, node, reason string
}

// queue reads the trial's jobs from squeue: every state, one line per
// array task, keyed by array job id and index.
func (s *Scheduler) queue(ctx context.Context) (map[taskKey]queueEntry, error) {
	jobNames := s.jobNames()
	if len(jobNames) == 0 {
		return nil, nil
	}
	out, err := s.command(ctx, "squeue", "-h", "-r", "--states=all", "--user="+s.user,
		"--name="+strings.Join(jobNames, ","), "-o", "%F|%K|%T|%N|%r").Output()
	if err != nil {
		return nil, fmt.Errorf("squeue: %s", cmdError(err))
	}
	q := map[taskKey]queueEntry{}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Split(strings.TrimSpace(line), "|")
		if len(f) != 5 {
			continue
		}
		idx, err := strconv.Atoi(f[1])
		if err != nil {
			continue // not an array task
		}
		q[taskKey{f[0], idx}] = queueEntry{state: f[2], node: f[3], reason: f[4]}
	}
	return q, nil
}

// jobNames are the job names of the trial's groups: those submitted, and
// those whose scripts are written (a task may be submitted by hand).
func (s *Scheduler) jobNames() []string {
	s.mu.Lock()
	types := maps.Clone(s.types)
	s.mu.Unlock()
	entries, _ := os.ReadDir(s.dir.Path(Dir))
	for _, e := range entries {
		if t, ok := strings.CutSuffix(e.Name(), ".sbatch"); ok {
			types[t] = true
		}
	}
	var out []string
	for _, t := range slices.Sorted(maps.Keys(types)) {
		out = append(out, s.JobName(t))
	}
	return out
}

// activeStates are squeue's states of a task that has not ended.
var activeStates = map[string]bool{
	"PENDING": true, "RUNNING": true, "CONFIGURING": true, "COMPLETING": true, "SUSPENDED": true,
	"REQUEUED": true, "REQUEUE_HOLD": true, "REQUEUE_FED": true, "RESIZING": true, "SIGNALING": true,
	"STAGE_OUT": true, "STOPPED": true, "RESV_DEL_HOLD": true,
}

// poll reads squeue until no tracked task is left, and ends the handles
// of tasks that have ended or left the queue.
func (s *Scheduler) poll() {
	tick := time.NewTicker(s.opts.Poll)
	defer tick.Stop()
	failures := 0
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		asked := s.tracked()
		q, err := s.queue(ctx)
		cancel()
		if err != nil {
			failures++
			// slurmctld is busy or briefly away: the tasks carry on.
			if failures%20 == 1 {
				s.opts.Logger.Warn("squeue failed; retrying", "err", err)
			}
		} else {
			failures = 0
			s.update(q, asked)
		}
		s.mu.Lock()
		if len(s.tasks) == 0 {
			s.polling = false
			s.mu.Unlock()
			return
		}
		s.mu.Unlock()
		<-tick.C
	}
}

// tracked are the tasks being tracked now: a squeue started now can say
// they left the queue (one submitted later may be missing from its answer).
func (s *Scheduler) tracked() map[taskKey]bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[taskKey]bool, len(s.tasks))
	for k := range s.tasks {
		out[k] = true
	}
	return out
}

// update ends the handles of the tasks in asked that q shows ended or does
// not show.
func (s *Scheduler) update(q map[taskKey]queueEntry, asked map[taskKey]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, t := range s.tasks {
		if !asked[key] {
			continue
		}
		e, ok := q[key]
		if ok && activeStates[e.state] {
			t.last.Store(&e)
			continue
		}
		var err error
		switch {
		case !ok:
			err = fmt.Errorf("slurm task %s is no longer in the queue", t)
		case e.state != "COMPLETED":
			err = &TaskError{Task: t.String(), State: e.state, Node: e.node, Reason: e.reason}
		}
		t.finish(err)
		delete(s.tasks, key)
	}
}

// StopAll cancels every job of the trial (SIGTERM to the workers, then
// SIGKILL after the cluster's KillWait) and waits until squeue shows none
// active; when ctx ends first it cancels them with SIGKILL and waits a
// little longer.
func (s *Scheduler) StopAll(ctx context.Context) error {
	if len(s.jobNames()) == 0 {
		return nil
	}
	if err := s.cancel(context.WithoutCancel(ctx)); err != nil {
		return err
	}
	if s.waitEmpty(ctx) == nil {
		return nil
	}
	kctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_ = s.cancel(kctx, "--signal=KILL", "--full")
	if err := s.waitEmpty(kctx); err != nil {
		return fmt.Errorf("controller: slurm jobs of %s still in the queue after scancel: %w", s.trial.Prefix(), err)
	}
	return fmt.Errorf("controller: killed the slurm jobs of %s that did not end on SIGTERM: %w", s.trial.Prefix(), ctx.Err())
}

// cancel runs scancel for the trial's job names (which also catches tasks
// submitted by hand from its scripts) and for the job ids submitted.
func (s *Scheduler) cancel(ctx context.Context, extra ...string) error {
	jobNames := s.jobNames()
	args := append([]string{"--user=" + s.user}, extra...)
	if len(jobNames) > 0 {
		if out, err := s.command(ctx, "scancel", append(args, "--name="+strings.Join(jobNames, ","))...).CombinedOutput(); err != nil {
			return fmt.Errorf("controller: scancel: %s", oneLine(out, err))
		}
	}
	if jobs := s.Jobs(); len(jobs) > 0 {
		// Ids of jobs already gone make scancel complain: that is fine.
		_ = s.command(ctx, "scancel", append(args, jobs...)...).Run()
	}
	return nil
}

// waitEmpty waits until squeue shows no active job of the trial and every
// handle has ended.
func (s *Scheduler) waitEmpty(ctx context.Context) error {
	for {
		asked := s.tracked()
		q, err := s.queue(ctx)
		if err == nil {
			active := 0
			for _, e := range q {
				if activeStates[e.state] {
					active++
				}
			}
			s.update(q, asked)
			s.mu.Lock()
			left := len(s.tasks)
			s.mu.Unlock()
			if active == 0 && left == 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(s.opts.Poll / 2):
		}
	}
}

func (s *Scheduler) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	if len(s.opts.Env) > 0 {
		cmd.Env = append(os.Environ(), s.opts.Env...)
	}
	return cmd
}

// cmdError is a failed command's error with its stderr, on one line.
func cmdError(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return oneLine(ee.Stderr, err)
	}
	return err.Error()
}

func oneLine(out []byte, err error) string {
	if msg := strings.Join(strings.Fields(string(bytes.TrimSpace(out))), " "); msg != "" {
		return msg
	}
	return err.Error()
}

// TaskError says how an array task ended when it did not complete.
type TaskError struct {
	Task, State, Node, Reason string
}

func (e *TaskError) Error() string {
	msg := fmt.Sprintf("slurm task %s ended %s", e.Task, e.State)
	if e.Node != "" {
		msg += " on " + e.Node
	}
	if e.Reason != "" && e.Reason != "None" {
		msg += " (" + e.Reason + ")"
	}
	return msg
}

// task is one array task: the controller.Handle of one worker on a cluster.
type task struct {
	s    *Scheduler
	key  taskKey
	last atomic.Pointer[queueEntry] // squeue's newest word while it runs
	done chan struct{}
	err  error // set before done closes
	once sync.Once
}

func (t *task) String() string        { return t.key.job + "_" + strconv.Itoa(t.key.index) }
func (t *task) PID() int              { return 0 }
func (t *task) Done() <-chan struct{} { return t.done }

func (t *task) Wait() error {
	<-t.done
	return t.err
}

func (t *task) finish(err error) {
	t.once.Do(func() {
		t.err = err
		close(t.done)
	})
}

// Signal forwards sig to the worker, which is the task's batch step.
func (t *task) Signal(sig os.Signal) error {
	name := "TERM"
	if s, ok := sig.(syscall.Signal); ok {
		name = strconv.Itoa(int(s))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := t.s.command(ctx, "scancel", "--batch", "--signal="+name, t.String()).CombinedOutput(); err != nil {
		return fmt.Errorf("controller: signal slurm task %s: %s", t, oneLine(out, err))
	}
	return nil
}

// Kill cancels the task.
func (t *task) Kill() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := t.s.command(ctx, "scancel", t.String()).CombinedOutput(); err != nil {
		return fmt.Errorf("controller: cancel slurm task %s: %s", t, oneLine(out, err))
	}
	return nil
}

// Node is the node the task runs on, once squeue has shown it running.
func (t *task) Node() string {
	if e := t.last.Load(); e != nil {
		return e.node
	}
	return ""
}

// Queued reports whether squeue shows the task pending, and its reason.
func (t *task) Queued() (bool, string) {
	e := t.last.Load()
	if e == nil || e.state != "PENDING" {
		return false, ""
	}
	return true, "slurm task " + t.String() + " PENDING: " + e.reason
}

// DryRun writes the scripts of every worker group of opts's trial without
// submitting anything, and prints them to w.
func (s *Scheduler) DryRun(opts controller.Options, w io.Writer) error {
	paths, err := s.WriteScripts(controller.PlanGroups(opts))
	for _, p := range paths {
		b, rerr := os.ReadFile(p)
		if rerr != nil {
			return fmt.Errorf("controller: %w", rerr)
		}
		fmt.Fprintf(w, "==> %s <==\n%s\n", p, b)
	}
	return err
}

// CancelTrial cancels every job of the trial: those recorded in
// slurm/jobs.txt and those with the trial's job names. It is for a trial
// whose controller is gone (`rlctl stop`); a live controller's StopAll
// does the same and waits.
func (s *Scheduler) CancelTrial(ctx context.Context) error {
	b, err := os.ReadFile(s.dir.Path(Dir, JobsFile))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("controller: %w", err)
	}
	s.mu.Lock()
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			s.jobs = append(s.jobs, f[0])
			s.types[f[1]] = true
		}
	}
	s.mu.Unlock()
	if len(s.jobNames()) == 0 {
		return nil
	}
	return s.cancel(ctx)
}
