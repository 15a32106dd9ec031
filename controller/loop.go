package controller

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/distrl/distrl/worker/member"
)

// loop monitors the running trial until it ends and says how. Restarts
// run under rctx.
func (c *Controller) loop(ctx, rctx context.Context) (Outcome, string, error) {
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

// onExit handles the exit of a worker process: one event, however many
// workers it hosts.
func (c *Controller) onExit(ctx context.Context, ev exitEvent) error {
	p := ev.proc
	if ev.handle != p.handle || p.restarting || p.finished {
		return nil // an old process of one that was restarted since
	}
	if !slices.ContainsFunc(p.members, func(m *trialWorker) bool { return m.lastState != member.StateCompleted }) {
		p.finished = true
		c.out.event("%s exited after completing its work", p.spec.Name)
		return nil
	}
	return c.failure(ctx, p, "process exited: "+describeExit(ev.err), false)
}

// check reads every worker's records (two listings, whatever the number of
// workers): the process of a LOST, ERROR or HUNG worker is restarted. It
// returns a reason to complete the trial when the workers that finish (the
// trainers, else the actors) have all completed.
func (c *Controller) check(ctx context.Context) (string, error) {
	qctx, cancel := context.WithTimeout(ctx, statsTimeout)
	defer cancel()
	statuses, err := c.panel.Workers(qctx)
	if err != nil {
		// etcd is slow or briefly gone: the workers carry on, and so do we.
		c.log.Warn("worker states not read", "err", err)
		return "", nil
	}
	byName := make(map[string]member.Status, len(statuses))
	for _, s := range statuses {
		byName[s.Name] = s
	}
	var hung []*trialWorker
	for _, m := range c.members {
		p := m.proc
		if p.restarting || p.finished {
			continue
		}
		st, ok := byName[m.name]
		if !ok {
			st = member.Status{Name: m.name, State: member.StateLost, Error: "no name records"}
		}
		// A record another process of the same name wrote (the one before
		// a restart) says nothing about the current one.
		if st.PID != 0 && p.handle.PID() != 0 && st.PID != p.handle.PID() {
			continue
		}
		if st.State == member.StateHung {
			hung = append(hung, m) // pinged below, all at once
			continue
		}
		m.lastState = st.State
		switch st.State {
		case member.StateLost, member.StateError:
			if err := c.failure(ctx, p, failureReason(m, st), false); err != nil {
				return "", err
			}
		}
	}
	if len(hung) > 0 {
		answered := c.answering(ctx, memberNames(hung))
		for _, m := range hung {
			// Its loop answers: the heartbeat was late (a name server
			// restart re-adds old records), not stuck.
			if answered[m.name] || m.proc.restarting {
				continue
			}
			m.lastState = member.StateHung
			st := byName[m.name]
			// A hung loop would not answer interrupt: kill it at once.
			if err := c.failure(ctx, m.proc, failureReason(m, st), true); err != nil {
				return "", err
			}
		}
	}
	finishers := member.TypeTrainer
	if len(c.cfg.GroupsOf(member.TypeTrainer)) == 0 {
		finishers = member.TypeActor
	}
	group := c.ofType(finishers)
	if len(group) > 0 && !slices.ContainsFunc(group, func(m *trialWorker) bool {
		return !m.proc.finished && m.lastState != member.StateCompleted
	}) {
		return fmt.Sprintf("every %s completed", finishers), nil
	}
	return "", nil
}

// failureReason says why m's process is restarted: the state, its error,
// and which worker when the process hosts several.
func failureReason(m *trialWorker, st member.Status) string {
	reason := string(st.State)
	if st.Error != "" {
		reason += ": " + st.Error
	}
	if len(m.proc.members) > 1 {
		reason = m.name + " " + reason
	}
	return reason
}

// answering pings ws at once and reports which answered within a tenth
// of the heartbeat bound (at least a second): a hung loop does not.
func (c *Controller) answering(ctx context.Context, ws []string) map[string]bool {
	pctx, cancel := context.WithTimeout(ctx, max(c.opts.HungAfter/10, time.Second))
	defer cancel()
	out := map[string]bool{}
	for _, r := range c.panel.GroupRequest(pctx, ws, member.CmdPing, nil) {
		if r.Err == nil {
			out[r.Worker] = true
		}
	}
	return out
}

// failure restarts process p, or fails the trial if p has used up its
// restarts. kill: end the process without asking its workers first.
func (c *Controller) failure(ctx context.Context, p *process, reason string, kill bool) error {
	limit := c.cfg.Stop.Restarts()
	if p.restarts >= limit {
		return &WorkerFailedError{Worker: p.spec.Name, Reason: reason, Restarts: p.restarts, Log: p.spec.LogPath}
	}
	p.restarts++
	c.restarts++
	p.restarting = true
	if c.record.Restarts == nil {
		c.record.Restarts = map[string]int{}
	}
	for _, m := range p.members {
		c.record.Restarts[m.name]++
		// The new process counts from zero: keep what the old one did.
		if m.lastStats != nil {
			s := sample{stats: m.lastStats}.counters()
			m.base.envSteps += s.envSteps
			m.base.episodes += s.episodes
		}
		m.lastStats = nil
		m.lastState = ""
	}
	// Written now, not with the new pid: a dashboard shows the restart
	// while it runs.
	c.writeRecord()
	c.out.event("restarting %s (%d of %d): %s", p.spec.Name, p.restarts, limit, reason)
	old := p.handle
	spec := p.spec
	c.restartWG.Add(1)
	go func() {
		defer c.restartWG.Done()
		h, err := c.restart(ctx, spec, old, kill)
		c.restarted <- restartResult{proc: p, handle: h, err: err} // buffered: one slot per process
	}()
	return nil
}

// onRestarted takes the result of a restart back into the loop.
func (c *Controller) onRestarted(ctx context.Context, r restartResult) error {
	p := r.proc
	p.restarting = false
	if r.handle != nil {
		p.handle = r.handle
		for _, m := range p.members {
			c.record.Workers[m.name] = r.handle.PID()
		}
		c.writeRecord()
		c.watch(p, r.handle)
	}
	if r.err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return c.failure(ctx, p, "restart failed: "+r.err.Error(), false)
	}
	c.out.event("%s restarted (pid %s)", p.spec.Name, pidString(r.handle))
	return nil
}

// restart ends the old process if it still runs, waits until its workers'
// names are free, starts a new process for them all and configures and
// starts its workers. It runs on its own goroutine and touches no process
// or member.
func (c *Controller) restart(ctx context.Context, spec WorkerSpec, old Handle, kill bool) (Handle, error) {
	select {
	case <-old.Done():
	default:
		if kill {
			_ = old.Kill()
		} else {
			// Alive but failed or lost: ask it to go, then make it.
			ictx, cancel := context.WithTimeout(ctx, interruptTimeout)
			c.panel.GroupRequest(ictx, spec.Workers, member.CmdInterrupt, nil)
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
	if err := c.waitNamesFree(ctx, spec.Workers); err != nil {
		return nil, err
	}
	h, err := c.opts.Scheduler.Start(ctx, spec)
	if err != nil {
		return nil, err
	}
	if err := c.waitRegistered(ctx, []launched{{spec, h}}, registerBase+time.Duration(spec.Hosts())*registerPerProc); err != nil {
		return h, err
	}
	// The process's groups in start order, as at the start (a colocated
	// policy worker before its actor).
	for _, group := range c.cfg.Groups() {
		n := 0
		switch {
		case group == spec.GroupName():
			n = spec.Hosts()
		case slices.ContainsFunc(spec.With, func(w Companion) bool { return w.Group == group }):
			n = 1
		default:
			continue
		}
		if err := c.configureAndStart(ctx, group, spec.Index, n); err != nil {
			return h, err
		}
	}
	return h, nil
}

// waitNamesFree waits until none of ws has an address record, or at most
// 3 TTLs + 2 s. A new worker cannot register while the old address lease
// lives: it is TTL long after a kill, gone at once after a graceful exit.
// (Its stream records share that lease: the new process could not
// register them earlier either.) It reads the panel's mirror of the
// addresses, as waitRegistered does, every registerPoll.
func (c *Controller) waitNamesFree(ctx context.Context, ws []string) error {
	free := time.Now().Add(3*c.opts.WorkerTTL + 2*time.Second)
	for time.Now().Before(free) {
		registered, err := c.panel.Addresses(ctx)
		if err == nil && !slices.ContainsFunc(ws, func(w string) bool { _, ok := registered[w]; return ok }) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(registerPoll):
		}
	}
	return nil
}

// collect polls every running worker's stats, appends a metrics line and
// shows the status line.
func (c *Controller) collect(ctx context.Context) *Metrics {
	var ask []string
	for _, m := range c.members {
		if !m.proc.restarting && !m.proc.finished {
			ask = append(ask, m.name)
		}
	}
	qctx, cancel := context.WithTimeout(ctx, min(statsTimeout, c.cfg.MetricsEvery()))
	defer cancel()
	for _, r := range c.panel.GroupRequest(qctx, ask, member.CmdStats, nil) {
		var st map[string]any
		if err := r.Decode(&st); err != nil {
			continue // keep the last figures: totals must not drop for a missed reply
		}
		m := c.byName[r.Worker]
		m.lastStats = st
		if s, ok := st["state"].(string); ok {
			m.lastState = member.State(s)
		}
	}
	samples := make([]sample, 0, len(c.members))
	running := 0
	for _, m := range c.members {
		state := string(m.lastState)
		switch {
		case m.proc.restarting:
			state = "RESTARTING"
		case m.proc.finished:
			state = "EXITED"
		}
		if m.lastState == member.StateRunning && !m.proc.restarting {
			running++
		}
		samples = append(samples, sample{name: m.name, typ: m.typ, state: state, stats: m.lastStats, base: m.base})
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
	if t := stop.TargetReturn; t != nil && m.MeanReturn != nil && m.ReturnEpisodes >= member.ReturnWindow && *m.MeanReturn >= *t {
		return fmt.Sprintf("mean return %.1f reached the target %g", *m.MeanReturn, *t)
	}
	if t := stop.EvalReturn; t != nil && m.BestReturn != nil && *m.BestReturn >= *t {
		return fmt.Sprintf("version %d evaluated at a mean return of %.1f, reaching the target %g", *m.BestVersion, *m.BestReturn, *t)
	}
	return ""
}
