package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker/member"
)

// workerArgs are the flags every worker of the trial gets.
func (c *Controller) workerArgs() []string {
	args := []string{"--nameresolve", c.endpoint, "--experiment", c.trial.Experiment, "--trial", c.trial.Trial}
	if !c.opts.RemoteWorkers {
		args = append(args, "--host", c.opts.Host)
	}
	if c.opts.OrphanTimeout > 0 {
		args = append(args, "--orphan-timeout", c.opts.OrphanTimeout.String())
	}
	if !c.opts.NoMetrics {
		// Any free port, on the address the worker advertises.
		args = append(args, "--metrics", ":0")
	}
	nrArgs, _ := c.nameResolveArgs()
	args = append(args, nrArgs...)
	// The name server answers: a worker that finds it busy (hundreds
	// starting at once on a small machine) waits as long as the
	// controller waits for it, rather than exits.
	args = append(args, "--ttl", c.opts.WorkerTTL.String(), "--nameresolve-wait", c.registerTimeout().String())
	if c.opts.HungAfter > 0 {
		args = append(args, "--heartbeat", heartbeat(c.opts.HungAfter, c.opts.Config.Workers).String())
	}
	return append(args, c.opts.WorkerArgs...)
}

// registerTimeout is how long the start waits for the workers to register:
// --register-timeout, else registerPerProc for each worker on top of registerBase.
func (c *Controller) registerTimeout() time.Duration {
	if c.opts.RegisterTimeout > 0 {
		return c.opts.RegisterTimeout
	}
	n := 0
	for _, g := range c.opts.Config.Workers {
		n += g.N()
	}
	return registerBase + time.Duration(n)*registerPerProc
}

// workerEnv is what every worker of the trial gets added to its environment.
func (c *Controller) workerEnv() []string {
	_, env := c.nameResolveArgs()
	return env
}

// heartbeat is the workers' --heartbeat: a tenth of the hung bound,
// between 100 ms and 1 s, but at least 1 ms per worker process of the
// trial, up to a third of the bound. Every beat of every process is a
// write to etcd (its loop record; the workers it hosts share it): 4096
// processes beating every second swamped the embedded etcd of a 2-core
// machine ("etcdserver: too many requests") and leases expired.
func heartbeat(hungAfter time.Duration, groups map[string]experiment.Group) time.Duration {
	n := 0
	for _, g := range groups {
		n += g.Processes()
	}
	hb := min(max(hungAfter/10, 100*time.Millisecond), time.Second)
	return max(hb, min(time.Duration(n)*time.Millisecond, hungAfter/3))
}

// groupSpecs are the process specs of every group, in start order; the
// groups on a CUDA device run cudaBinary.
func groupSpecs(cfg *experiment.Config, dir TrialDir, args, env []string, cudaBinary string) [][]WorkerSpec {
	var out [][]WorkerSpec
	for _, group := range cfg.Groups() {
		if cfg.Workers[group].Colocate != "" {
			continue // its workers are in the host group's processes
		}
		exe := ""
		if usesCUDA(cfg.Workers[group]) {
			exe = cudaBinary
		}
		var with []Companion
		for _, c := range cfg.Colocated(group) {
			with = append(with, Companion{Group: c, Type: cfg.TypeOf(c)})
		}
		out = append(out, ProcessSpecs(group, cfg.TypeOf(group), cfg.Workers[group], dir, args, env, exe, with...))
	}
	return out
}

// PlanGroups are the worker process specs, group by group in start order,
// that Run would start for opts, with the name server of opts as given:
// what a cluster scheduler writes scripts for ahead of a run (--dry-run).
func PlanGroups(opts Options) [][]WorkerSpec {
	opts.setDefaults()
	c := &Controller{opts: opts, trial: names.NewTrial(opts.Config.Name, opts.Trial), endpoint: strings.Join(opts.NameResolve, ",")}
	return groupSpecs(opts.Config, opts.Dir, c.workerArgs(), c.workerEnv(), opts.CUDABinary)
}

// workerConfig is the configure kwargs of one worker.
func (c *Controller) workerConfig(group string, index int) map[string]any {
	return workerKwargs(c.cfg, c.opts.Types, group, index, c.dir.Path(CheckpointsDir))
}

// startWorkers launches every worker process, waits for all workers to
// register, then configures and starts them group by group in start order.
// The process of a worker that does not answer then (a lease lost on a
// loaded machine, a process gone) is restarted under rctx as the loop
// would; a worker that refuses its configuration fails the start.
func (c *Controller) startWorkers(ctx, rctx context.Context) error {
	for _, specs := range groupSpecs(c.cfg, c.dir, c.workerArgs(), c.workerEnv(), c.opts.CUDABinary) {
		hs, err := startGroup(ctx, c.opts.Scheduler, specs)
		for i, h := range hs {
			c.addProcess(specs[i], h)
		}
		if err != nil {
			return err
		}
	}
	c.writeRecord()
	c.exited = make(chan exitEvent, len(c.procs))
	c.restarted = make(chan restartResult, len(c.procs))
	in := ""
	if len(c.procs) != len(c.members) {
		in = fmt.Sprintf(" in %d processes", len(c.procs))
	}
	c.out.event("started %d workers%s (%s scheduler); logs in %s", len(c.members), in, c.opts.SchedulerName, c.dir.Path(LogsDir))

	timeout := c.registerTimeout()
	all := make([]launched, len(c.procs))
	for i, p := range c.procs {
		all[i] = launched{p.spec, p.handle}
	}
	if err := c.waitRegistered(ctx, all, timeout); err != nil {
		return err
	}
	c.out.event("all %d workers registered after %s", len(c.members), time.Since(c.began).Round(time.Millisecond))
	for _, p := range c.procs {
		c.watch(p, p.handle)
	}
	// Each group is configured and started before the next is configured:
	// a policy worker fetches the newest parameters when it is configured,
	// and a trainer answers only once it runs.
	for _, group := range c.cfg.Groups() {
		if err := c.configureAndStart(ctx, group, 0, c.cfg.Workers[group].N()); err != nil {
			if err := c.restartUnanswered(rctx, err); err != nil {
				return err
			}
		}
	}
	return nil
}

// restartUnanswered restarts the processes of the workers that did not
// answer a start-up request, err, in start order. It returns err if a
// worker refused (a remote error: no restart fixes a configuration) or
// err is no ConfigureError.
func (c *Controller) restartUnanswered(ctx context.Context, err error) error {
	var ce *ConfigureError
	if !errors.As(err, &ce) || ce.Refused() {
		return err
	}
	why := map[*process]string{}
	for name, e := range ce.Failures {
		if m := c.byName[name]; m != nil && why[m.proc] == "" {
			why[m.proc] = fmt.Sprintf("%s did not answer %s: %v", name, ce.Command, e)
		}
	}
	for _, p := range c.procs {
		if reason, ok := why[p]; ok && !p.restarting {
			if err := c.failure(ctx, p, reason, false); err != nil {
				return err
			}
		}
	}
	return nil
}

// restartingProcs counts the processes being restarted.
func (c *Controller) restartingProcs() int {
	n := 0
	for _, p := range c.procs {
		if p.restarting {
			n++
		}
	}
	return n
}

// addProcess takes a started process and its workers into the trial.
func (c *Controller) addProcess(spec WorkerSpec, h Handle) {
	p := &process{spec: spec, handle: h}
	for _, w := range spec.Members() {
		name := w.Name
		m := &trialWorker{name: name, group: w.Group, typ: w.Type, index: w.Index, proc: p}
		p.members = append(p.members, m)
		c.members = append(c.members, m)
		c.byName[name] = m
		c.record.Workers[name] = h.PID()
	}
	c.procs = append(c.procs, p)
}

// group lists the members of one group, by index.
func (c *Controller) group(name string) []*trialWorker {
	return c.membersWhere(func(m *trialWorker) bool { return m.group == name })
}

// ofType lists the members of every group of one type.
func (c *Controller) ofType(typ string) []*trialWorker {
	return c.membersWhere(func(m *trialWorker) bool { return m.typ == typ })
}

func (c *Controller) membersWhere(keep func(*trialWorker) bool) []*trialWorker {
	var out []*trialWorker
	for _, m := range c.members {
		if keep(m) {
			out = append(out, m)
		}
	}
	return out
}

// launched is a process as waitRegistered sees it: a copy, so that a
// restart's goroutine can wait without touching the loop's processes.
type launched struct {
	spec   WorkerSpec
	handle Handle
}

// waitRegistered waits until every worker of procs has an address record
// (the panel's mirror of them, every registerPoll). A process that exits
// first, or whose workers are still missing at the timeout, fails the wait.
// Time in a scheduler's queue does not count: a task still queued at the
// timeout gets another, and so does one that left the queue since the
// last timeout, so that every task has the whole timeout to register once
// it runs.
func (c *Controller) waitRegistered(ctx context.Context, procs []launched, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	wasQueued := false
	tick := time.NewTicker(registerPoll)
	defer tick.Stop()
	for {
		registered, err := c.panel.Addresses(ctx)
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		var missing, exited []Unregistered
		var waiting []launched
		for _, p := range procs {
			u := Unregistered{Worker: p.spec.Name, Log: p.spec.LogPath}
			for _, w := range p.spec.Workers {
				if _, ok := registered[w]; !ok {
					u.Workers = append(u.Workers, w)
				}
			}
			if len(u.Workers) == 0 {
				continue
			}
			select {
			case <-p.handle.Done():
				u.Exit, u.Tail = describeExit(p.handle.Wait()), tail(u.Log, logTailBytes)
				exited = append(exited, u)
			default:
			}
			missing = append(missing, u)
			waiting = append(waiting, p)
		}
		if len(exited) > 0 {
			return &RegisterError{Timeout: timeout, Missing: sortUnregistered(exited)}
		}
		if len(missing) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			q, n := queued(waiting)
			if len(q) > 0 {
				slices.Sort(q)
				c.out.event("%d workers still queued, waiting for them: %s", n, strings.Join(q, ", "))
			}
			if len(q) > 0 || wasQueued {
				wasQueued = len(q) > 0
				deadline.Reset(timeout)
				continue
			}
			for i := range missing {
				missing[i].Tail = tail(missing[i].Log, 512)
			}
			return &RegisterError{Timeout: timeout, Missing: sortUnregistered(missing)}
		case <-tick.C:
		}
	}
	// No panel.Connect: it reads each name (4096 round trips to etcd for
	// 4096 workers), while the first group request resolves them all with
	// one listing and connects.
	return nil
}

func sortUnregistered(u []Unregistered) []Unregistered {
	slices.SortFunc(u, func(a, b Unregistered) int { return strings.Compare(a.Worker, b.Worker) })
	return u
}

// configureAndStart sends workers group/first .. group/first+n-1 each its
// own configuration, all at once, and then the start command to those
// that took it. A *ConfigureError holds the failures of both.
func (c *Controller) configureAndStart(ctx context.Context, group string, first, n int) error {
	ws := make([]string, n)
	kwargs := make([]any, n)
	for i := range ws {
		ws[i] = names.WorkerName(group, first+i)
		kwargs[i] = c.workerConfig(group, first+i)
	}
	err := c.requestEach(ctx, ws, member.CmdConfigure, kwargs)
	var ce *ConfigureError
	if err == nil {
		return c.requestGroup(ctx, ws, member.CmdStart, nil)
	}
	if !errors.As(err, &ce) || ce.Refused() {
		return err
	}
	ws = slices.DeleteFunc(ws, func(w string) bool { return ce.Failures[w] != nil })
	var se *ConfigureError
	if err := c.requestGroup(ctx, ws, member.CmdStart, nil); errors.As(err, &se) {
		for w, e := range se.Failures {
			ce.Failures[w] = e // it names its command
		}
	} else if err != nil {
		return err
	}
	return ce
}

// requestGroup sends the same command to every worker of ws at once.
func (c *Controller) requestGroup(ctx context.Context, ws []string, cmd string, kwargs any) error {
	each := make([]any, len(ws))
	for i := range each {
		each[i] = kwargs
	}
	return c.requestEach(ctx, ws, cmd, each)
}

func (c *Controller) requestEach(ctx context.Context, ws []string, cmd string, kwargs []any) error {
	if len(ws) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	failures := map[string]error{}
	for _, r := range c.panel.GroupRequestEach(ctx, ws, cmd, kwargs) {
		if r.Err != nil {
			failures[r.Worker] = r.Err
		}
	}
	if len(failures) > 0 {
		return &ConfigureError{Command: cmd, Failures: failures}
	}
	return nil
}

// memberNames are the names of ms.
func memberNames(ms []*trialWorker) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.name
	}
	return out
}

// watch reports the exit of h, the handle of p, to the loop: one
// goroutine per process, however many workers it hosts.
func (c *Controller) watch(p *process, h Handle) {
	go func() {
		select {
		case <-h.Done():
		case <-c.quit:
			return
		}
		select {
		case c.exited <- exitEvent{proc: p, handle: h, err: h.Wait()}:
		case <-c.quit:
		}
	}()
}

// describeExit says how a process ended.
func describeExit(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.Error()
	}
	return err.Error()
}

// tail returns the last n bytes of a file, from a line start where it can.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(fi.Size()-n, 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return ""
	}
	s := string(b)
	if off > 0 {
		if i := strings.IndexByte(s, '\n'); i >= 0 {
			s = s[i+1:]
		}
	}
	return s
}
