package controller

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/worker"
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
	nrArgs, _ := c.nameResolveArgs()
	args = append(args, nrArgs...)
	args = append(args, "--ttl", c.opts.WorkerTTL.String())
	if c.opts.HungAfter > 0 {
		args = append(args, "--heartbeat", min(max(c.opts.HungAfter/10, 100*time.Millisecond), time.Second).String())
	}
	return append(args, c.opts.WorkerArgs...)
}

// workerEnv is what every worker of the trial gets added to its environment.
func (c *Controller) workerEnv() []string {
	_, env := c.nameResolveArgs()
	return env
}

// groupSpecs are the worker specs of every group, in start order.
func groupSpecs(cfg *experiment.Config, dir TrialDir, args, env []string) [][]WorkerSpec {
	var out [][]WorkerSpec
	for _, typ := range cfg.Types() {
		g := cfg.Workers[typ]
		specs := make([]WorkerSpec, g.Count)
		for i := range specs {
			name := names.WorkerName(typ, i)
			specs[i] = WorkerSpec{Type: typ, Index: i, Name: name, Args: args, Env: env, LogPath: dir.Log(name), Resources: g.Resources}
		}
		out = append(out, specs)
	}
	return out
}

// workerConfig is the configure kwargs of one worker.
func (c *Controller) workerConfig(typ string, index int) map[string]any {
	kw := c.cfg.WorkerConfig(typ, index)
	if _, ok := kw["checkpoint_dir"]; !ok {
		switch typ {
		case worker.TypeTrainer:
			kw["checkpoint_dir"] = c.dir.Path(CheckpointsDir)
		case worker.TypeReplay: // one directory per shard: their tables share names
			kw["checkpoint_dir"] = filepath.Join(c.dir.Path(CheckpointsDir), names.WorkerName(typ, index))
		}
	}
	return kw
}

// startWorkers launches every worker, waits for all to register, then
// configures and starts them group by group in start order.
func (c *Controller) startWorkers(ctx context.Context) error {
	for _, specs := range groupSpecs(c.cfg, c.dir, c.workerArgs(), c.workerEnv()) {
		hs, err := startGroup(ctx, c.opts.Scheduler, specs)
		for i, h := range hs {
			m := &member{spec: specs[i], handle: h}
			c.members = append(c.members, m)
			c.byName[m.spec.Name] = m
			c.record.Workers[m.spec.Name] = h.PID()
		}
		if err != nil {
			return err
		}
	}
	c.writeRecord()
	c.exited = make(chan exitEvent, len(c.members))
	c.restarted = make(chan restartResult, len(c.members))
	c.out.event("started %d workers (%s scheduler); logs in %s", len(c.members), c.opts.SchedulerName, c.dir.Path(LogsDir))

	timeout := c.opts.RegisterTimeout
	if timeout <= 0 {
		timeout = registerBase + time.Duration(len(c.members))*registerPerProc
	}
	all := make(map[string]Handle, len(c.members))
	for _, m := range c.members {
		all[m.spec.Name] = m.handle
	}
	if err := c.waitRegistered(ctx, all, timeout); err != nil {
		return err
	}
	c.out.event("all %d workers registered after %s", len(c.members), time.Since(c.began).Round(time.Millisecond))
	for _, m := range c.members {
		c.watch(m.spec.Name, m.handle)
	}
	// Each group is configured and started before the next is configured:
	// a policy worker fetches the newest parameters when it is configured,
	// and a trainer answers only once it runs.
	for _, typ := range c.cfg.Types() {
		if err := c.configureGroup(ctx, c.group(typ)); err != nil {
			return err
		}
		if err := c.requestGroup(ctx, c.group(typ), worker.CmdStart, nil); err != nil {
			return err
		}
	}
	return nil
}

// group lists the members of one type, by index.
func (c *Controller) group(typ string) []*member {
	var out []*member
	for _, m := range c.members {
		if m.spec.Type == typ {
			out = append(out, m)
		}
	}
	return out
}

// waitRegistered waits until every worker in procs has an address record
// and connects the panel to them. A worker whose process exits first, or
// that is still missing at the timeout, fails the wait.
func (c *Controller) waitRegistered(ctx context.Context, procs map[string]Handle, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(registerPoll)
	defer tick.Stop()
	for {
		entries, err := c.repo.Find(ctx, c.trial.WorkerPrefix())
		if err != nil && ctx.Err() != nil {
			return ctx.Err()
		}
		registered := map[string]bool{}
		for _, e := range entries {
			registered[strings.TrimPrefix(e.Key, c.trial.WorkerPrefix())] = true
		}
		var missing, exited []Unregistered
		for name, h := range procs {
			if registered[name] {
				continue
			}
			u := Unregistered{Worker: name, Log: c.dir.Log(name)}
			select {
			case <-h.Done():
				u.Exit, u.Tail = describeExit(h.Wait()), tail(u.Log, logTailBytes)
				exited = append(exited, u)
			default:
			}
			missing = append(missing, u)
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
			var names []string
			for _, u := range missing {
				names = append(names, u.Worker)
			}
			if q := queued(procs, names); len(q) > 0 {
				slices.Sort(q)
				c.out.event("%d workers still queued, waiting for them: %s", len(q), strings.Join(q, ", "))
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
	names := make([]string, 0, len(procs))
	for n := range procs {
		names = append(names, n)
	}
	slices.Sort(names)
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	return c.panel.Connect(ctx, names...)
}

func sortUnregistered(u []Unregistered) []Unregistered {
	slices.SortFunc(u, func(a, b Unregistered) int { return strings.Compare(a.Worker, b.Worker) })
	return u
}

// configureGroup sends each member its own configuration, all at once.
func (c *Controller) configureGroup(ctx context.Context, ms []*member) error {
	kwargs := make([]any, len(ms))
	for i, m := range ms {
		kwargs[i] = c.workerConfig(m.spec.Type, m.spec.Index)
	}
	return c.requestEach(ctx, ms, worker.CmdConfigure, kwargs)
}

// requestGroup sends the same command to every member at once.
func (c *Controller) requestGroup(ctx context.Context, ms []*member, cmd string, kwargs any) error {
	each := make([]any, len(ms))
	for i := range each {
		each[i] = kwargs
	}
	return c.requestEach(ctx, ms, cmd, each)
}

func (c *Controller) requestEach(ctx context.Context, ms []*member, cmd string, kwargs []any) error {
	if len(ms) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.spec.Name
	}
	failures := map[string]error{}
	for _, r := range c.panel.GroupRequestEach(ctx, names, cmd, kwargs) {
		if r.Err != nil {
			failures[r.Worker] = r.Err
		}
	}
	if len(failures) > 0 {
		return &ConfigureError{Command: cmd, Failures: failures}
	}
	return nil
}

// watch reports the exit of h, the process of worker name, to the loop.
func (c *Controller) watch(name string, h Handle) {
	go func() {
		select {
		case <-h.Done():
		case <-c.quit:
			return
		}
		select {
		case c.exited <- exitEvent{name: name, handle: h, err: h.Wait()}:
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
