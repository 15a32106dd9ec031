package controller

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/distrl/distrl/nameresolve"
	"github.com/distrl/distrl/worker"
)

// loop monitors the running trial until it ends and says how.
func (c *Controller) loop(ctx context.Context) (Outcome, string, error) {
	monitor := time.NewTicker(c.opts.MonitorInterval)
	defer monitor.Stop()
	collect := time.NewTicker(c.cfg.MetricsEvery())
	defer collect.Stop()
	var wall <-chan time.Time
	if d := c.cfg.Stop.WallTimeLimit(); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		wall = t.C
	}
	// Restarts run on their own goroutines under rctx, cancelled when the
	// loop ends so that shutdown does not race a restart.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for {
		var err error
		select {
		case <-ctx.Done():
			return Interrupted, "interrupted", nil
		case r := <-c.stopReq:
			return r.outcome, r.reason, nil
		case <-wall:
			return Completed, fmt.Sprintf("wall time %s reached", c.cfg.Stop.WallTime), nil
		case ev := <-c.exited:
			err = c.onExit(rctx, ev)
		case r := <-c.restarted:
			err = c.onRestarted(rctx, r)
		case <-monitor.C:
			var why string
			if why, err = c.check(rctx); why != "" {
				return Completed, why, nil
			}
		case <-collect.C:
			m := c.collect(ctx)
			if why := c.stopCondition(m); why != "" {
				return Completed, why, nil
			}
		}
		if err != nil {
			return Failed, err.Error(), err
		}
	}
}

// onExit handles the exit of a worker process.
func (c *Controller) onExit(ctx context.Context, ev exitEvent) error {
	m := c.byName[ev.name]
	if m == nil || ev.handle != m.handle || m.restarting {
		return nil // an old process of a worker that was restarted since
	}
	if m.lastState == worker.StateCompleted {
		m.finished = true
		c.out.event("%s exited after completing its work", ev.name)
		return nil
	}
	return c.failure(ctx, m, "process exited: "+describeExit(ev.err), false)
}

// check reads every worker's records: a LOST or ERROR worker is restarted.
// It returns a reason to complete the trial when the workers that finish
// (the trainers, else the actors) have all completed.
func (c *Controller) check(ctx context.Context) (string, error) {
	qctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	statuses, err := c.panel.Workers(qctx)
	if err != nil {
		// etcd is slow or briefly gone: the workers carry on, and so do we.
		c.log.Warn("worker states not read", "err", err)
		return "", nil
	}
	byName := make(map[string]worker.Status, len(statuses))
	for _, s := range statuses {
		byName[s.Name] = s
	}
	for _, m := range c.members {
		if m.restarting || m.finished {
			continue
		}
		st, ok := byName[m.spec.Name]
		if !ok {
			st = worker.Status{Name: m.spec.Name, State: worker.StateLost, Error: "no name records"}
		}
		// A record another process of the same name wrote (the one before
		// a restart) says nothing about the current one.
		if st.PID != 0 && m.handle.PID() != 0 && st.PID != m.handle.PID() {
			continue
		}
		if st.State == worker.StateHung && c.answers(ctx, m.spec.Name) {
			// Its loop answers now: the heartbeat was late (a name server
			// restart re-adds old records), not stuck.
			continue
		}
		m.lastState = st.State
		switch st.State {
		case worker.StateLost, worker.StateError, worker.StateHung:
			reason := string(st.State)
			if st.Error != "" {
				reason += ": " + st.Error
			}
			// A hung loop would not answer interrupt: kill it at once.
			if err := c.failure(ctx, m, reason, st.State == worker.StateHung); err != nil {
				return "", err
			}
		}
	}
	finishers := worker.TypeTrainer
	if _, ok := c.cfg.Workers[worker.TypeTrainer]; !ok {
		finishers = worker.TypeActor
	}
	group := c.group(finishers)
	if len(group) > 0 && !slices.ContainsFunc(group, func(m *member) bool {
		return !m.finished && m.lastState != worker.StateCompleted
	}) {
		return fmt.Sprintf("every %s completed", finishers), nil
	}
	return "", nil
}

// answers reports whether the worker's loop answers a ping within a
// heartbeat bound's tenth (at least a second): a hung loop does not.
func (c *Controller) answers(ctx context.Context, name string) bool {
	pctx, cancel := context.WithTimeout(ctx, max(c.opts.HungAfter/10, time.Second))
	defer cancel()
	return c.panel.Request(pctx, name, worker.CmdPing, nil, nil) == nil
}

// failure restarts m, or fails the trial if m has used up its restarts.
// kill: end its process without asking it first.
func (c *Controller) failure(ctx context.Context, m *member, reason string, kill bool) error {
	limit := c.cfg.Stop.Restarts()
	if m.restarts >= limit {
		return &WorkerFailedError{Worker: m.spec.Name, Reason: reason, Restarts: m.restarts, Log: m.spec.LogPath}
	}
	m.restarts++
	c.restarts++
	m.restarting = true
	// The new process counts from zero: keep what the old one did.
	if m.lastStats != nil {
		s := sample{stats: m.lastStats}.counters()
		m.base.envSteps += s.envSteps
		m.base.episodes += s.episodes
	}
	m.lastStats = nil
	m.lastState = ""
	c.out.event("restarting %s (%d of %d): %s", m.spec.Name, m.restarts, limit, reason)
	old := m.handle
	spec := m.spec
	c.restartWG.Add(1)
	go func() {
		defer c.restartWG.Done()
		h, err := c.restart(ctx, spec, old, kill)
		c.restarted <- restartResult{name: spec.Name, handle: h, err: err} // buffered: one slot per member
	}()
	return nil
}

// onRestarted takes the result of a restart back into the loop.
func (c *Controller) onRestarted(ctx context.Context, r restartResult) error {
	m := c.byName[r.name]
	m.restarting = false
	if r.handle != nil {
		m.handle = r.handle
		c.record.Workers[r.name] = r.handle.PID()
		c.writeRecord()
		c.watch(r.name, r.handle)
	}
	if r.err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.failure(ctx, m, "restart failed: "+r.err.Error(), false)
	}
	c.out.event("%s restarted (pid %s)", r.name, pidString(r.handle))
	return nil
}

// restart ends the old process of a worker if it still runs, waits until
// its name is free, starts a new one and configures and starts it. It
// runs on its own goroutine and touches no member.
func (c *Controller) restart(ctx context.Context, spec WorkerSpec, old Handle, kill bool) (Handle, error) {
	select {
	case <-old.Done():
	default:
		if kill {
			_ = old.Kill()
		} else {
			// Alive but failed or lost: ask it to go, then make it.
			ictx, cancel := context.WithTimeout(ctx, interruptTimeout)
			_ = c.panel.Request(ictx, spec.Name, worker.CmdInterrupt, nil, nil)
			cancel()
			select {
			case <-old.Done():
			case <-time.After(c.opts.StopGrace / 3):
				_ = old.Kill()
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		select {
		case <-old.Done():
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	// The new worker cannot register while the old address lease lives:
	// it is TTL long after a kill, gone at once after a graceful exit.
	// (Its stream records share that lease: the new process could not
	// register them earlier either.)
	key := c.trial.Worker(spec.Name)
	free := time.Now().Add(3*c.opts.WorkerTTL + 2*time.Second)
	for {
		_, err := c.repo.Get(ctx, key)
		if errors.Is(err, nameresolve.ErrNotFound) || time.Now().After(free) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(registerPoll):
		}
	}
	h, err := c.opts.Scheduler.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := c.waitRegistered(ctx, map[string]Handle{spec.Name: h}, registerBase); err != nil {
		return h, err
	}
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := c.panel.Request(rctx, spec.Name, worker.CmdConfigure, c.workerConfig(spec.Type, spec.Index), nil); err != nil {
		return h, err
	}
	if err := c.panel.Request(rctx, spec.Name, worker.CmdStart, nil, nil); err != nil {
		return h, err
	}
	return h, nil
}

// collect polls every running worker's stats, appends a metrics line and
// shows the status line.
func (c *Controller) collect(ctx context.Context) *Metrics {
	var ask []string
	for _, m := range c.members {
		if !m.restarting && !m.finished {
			ask = append(ask, m.spec.Name)
		}
	}
	qctx, cancel := context.WithTimeout(ctx, min(statsTimeout, c.cfg.MetricsEvery()))
	defer cancel()
	for _, r := range c.panel.GroupRequest(qctx, ask, worker.CmdStats, nil) {
		var st map[string]any
		if err := r.Decode(&st); err != nil {
			continue // keep the last figures: totals must not drop for a missed reply
		}
		m := c.byName[r.Worker]
		m.lastStats = st
		if s, ok := st["state"].(string); ok {
			m.lastState = worker.State(s)
		}
	}
	samples := make([]sample, 0, len(c.members))
	running := 0
	for _, m := range c.members {
		state := string(m.lastState)
		switch {
		case m.restarting:
			state = "RESTARTING"
		case m.finished:
			state = "EXITED"
		}
		if m.lastState == worker.StateRunning && !m.restarting {
			running++
		}
		samples = append(samples, sample{name: m.spec.Name, typ: m.spec.Type, state: state, stats: m.lastStats, base: m.base})
	}
	now := time.Now()
	c.lastMu.Lock()
	prev := c.last
	c.lastMu.Unlock()
	m := aggregate(now, now.Sub(c.running), samples, prev, c.restarts)
	if line, err := json.Marshal(m); err == nil {
		if _, err := c.metrics.Write(append(line, '\n')); err != nil {
			c.log.Warn("metrics line not written", "err", err)
		}
	}
	c.lastMu.Lock()
	c.last = m
	c.lastMu.Unlock()
	c.out.status(statusLine(m, running, len(c.members)))
	return m
}

// stopCondition returns why the trial is done, or "".
func (c *Controller) stopCondition(m *Metrics) string {
	stop := c.cfg.Stop
	if stop.EnvSteps > 0 && m.EnvSteps >= stop.EnvSteps {
		return fmt.Sprintf("%d env steps reached (limit %d)", m.EnvSteps, stop.EnvSteps)
	}
	if t := stop.TargetReturn; t != nil && m.MeanReturn != nil && m.ReturnEpisodes >= worker.ReturnWindow && *m.MeanReturn >= *t {
		return fmt.Sprintf("mean return %.1f reached the target %g", *m.MeanReturn, *t)
	}
	return ""
}
