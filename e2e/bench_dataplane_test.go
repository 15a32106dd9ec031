package e2e

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/experiment"
	"github.com/distrl/distrl/internal/shm"
	"github.com/distrl/distrl/internal/testsupport/eventually"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/panel"
)

// End-to-end benchmarks of the data plane: real `rlctl worker` processes
// (actors, a policy worker, sinks: one per 4 actors, as cartpole-sink
// runs them) on one machine, driven by a control
// panel from the benchmark, against BenchmarkSingleLoopLimit, the same work
// done by one loop in this process with no network.
//
// # How the pipeline benchmarks time themselves
//
// A pipeline is a set of processes that runs on its own; what can be
// measured is its rate over a wall-clock window, not the cost of one
// operation. One b.N "op" is therefore one window of pipelineWindow (4 s)
// of steady state, after the processes were started and configured and ran
// for pipelineWarmup (1 s); b.N windows are measured back to back as one.
// Only the window is timed, and a window is longer than the default
// -benchtime (1 s), so Go runs each sub-benchmark exactly once (b.N = 1),
// as it does with -benchtime 1x; a longer -benchtime gives b.N windows in
// one run rather than repeated set-ups. The steps/s metric is the figure;
// ns/op would only repeat the window length, so it is not reported.
//
// Besides steps/s (environment steps per second, summed over the actors,
// from their "stats"), each reports, over the same window, what explains
// it: rows/infer (rows per forward pass of the policy worker: how much the
// requests of the ring and of several actors were batched), actor-busy
// (the fraction of the window an actor spent in Poll, averaged over the
// actors; the rest it mostly waited for inference replies), actor-spun/req
// (the actors' waits that ended on a reply found in shared memory while
// they looked for it, rather than by a wake-up, per request: see
// worker.MemoryWaiter), policy-spun/batch (the same for the policy
// worker's waits for requests, per batch), policy-busy
// (the same for the policy worker), sink-steps/s (agent steps that
// reached the sinks: whether the sample path keeps up), req-msgs/step
// (inference request messages per environment step: 1/rows per request),
// bytes/step (inference requests and sample batches, per step),
// ring-slots (the slots the actors stepped their rings in at the end, see
// actorworker.AutoRingTime) and cpu-us/step, actor-cpu-us/step,
// policy-cpu-us/step and sink-cpu-us/step (the CPU time
// of the processes, every thread of them, libzmq's I/O threads too, per
// environment step: on a machine shared with other work the steadiest
// figure, and C cores cannot step more than C over their sum per second).
//
// These benchmarks measure and report; they assert nothing about timings.

const (
	pipelineWarmup = time.Second
	pipelineWindow = 4 * time.Second
)

// BenchmarkPipeline runs one actor process stepping CartPole-v1 with a
// ring of 1, 2 or 8 environments and remote inference, one policy worker
// process and one sink process that takes the actor's sample batches.
// steps/s is environment steps per second summed over the actors.
func BenchmarkPipeline(b *testing.B) {
	c := newCluster(b) // one name server for every sub-benchmark; a trial each
	for _, ring := range []int{1, 2, 8} {
		b.Run(fmt.Sprint("ring=", ring), func(b *testing.B) {
			benchPipeline(b, c.benchTrial(b), pipeline{actors: 1, ring: ring})
		})
	}
}

// BenchmarkPipelineActors is BenchmarkPipeline with 1, 2 or 4 actor
// processes, each with a ring of 8, 64 or 256 environments, sharing the
// policy worker and the sink.
func BenchmarkPipelineActors(b *testing.B) {
	c := newCluster(b)
	for _, actors := range []int{1, 2, 4} {
		for _, envs := range []int{8, 64, 256} {
			b.Run(fmt.Sprintf("actors=%d/envs=%d", actors, envs), func(b *testing.B) {
				benchPipeline(b, c.benchTrial(b), pipeline{actors: actors, ring: envs})
			})
		}
	}
}

// BenchmarkPipelineColocated is BenchmarkPipelineActors with a policy
// worker in each actor's process (rlctl worker --with policy, the policy
// group's colocate: actor, as in cartpole-sink): the actor's requests go
// to it in memory in the same loop, with no hand-off between processes;
// each policy worker batches only its own actor's requests. The ones
// ending in /ring send them through a shared-memory ring to the own
// process instead, encoded (DISTRL_INPROCESS=0, as before the in-process
// path). The ones ending in /episodes cut the actors' batches at every
// episode's end (without span_episodes).
func BenchmarkPipelineColocated(b *testing.B) {
	c := newCluster(b)
	for _, p := range []struct {
		actors, envs   int
		ring, episodes bool
	}{{1, 8, false, false}, {2, 8, false, false}, {2, 8, true, false}, {2, 8, false, true}, {4, 8, false, false},
		{2, 64, false, false}, {2, 64, true, false}, {2, 64, false, true}, {2, 256, false, false}} {
		name := fmt.Sprintf("actors=%d/envs=%d", p.actors, p.envs)
		if p.ring {
			name += "/ring"
		}
		if p.episodes {
			name += "/episodes"
		}
		b.Run(name, func(b *testing.B) {
			sub := c.benchTrial(b)
			if p.ring {
				sub.env = append(sub.env, stream.InProcessEnv+"=0")
			}
			benchPipeline(b, sub, pipeline{actors: p.actors, ring: p.envs, colocate: true, episodeBatches: p.episodes})
		})
	}
}

// BenchmarkPipelineScale is cartpole-sink grown to the size of a 16-core
// machine: 1, 2, 4, 8 and 14 actors of 64 CartPoles sharing 1, 2 or 4
// policy worker processes (threads: auto) and a sink per 4 actors. On a
// machine of fewer cores it measures the cores, not distrl.
func BenchmarkPipelineScale(b *testing.B) {
	c := newCluster(b)
	for _, actors := range []int{1, 2, 4, 8, 14} {
		for _, policies := range []int{1, 2, 4} {
			if policies > actors {
				continue
			}
			b.Run(fmt.Sprintf("actors=%d/policies=%d", actors, policies), func(b *testing.B) {
				benchPipeline(b, c.benchTrial(b), pipeline{actors: actors, ring: 64, policies: policies})
			})
		}
	}
}

// BenchmarkPipelineSlots is 2 actors of 64 environments with their ring
// stepped as 1, 2 or 4 slots (ring_slots): 1 is an actor that steps every
// environment and then waits for all their actions; with 2 (the default)
// one half steps while the other waits.
func BenchmarkPipelineSlots(b *testing.B) {
	c := newCluster(b)
	for _, slots := range []int{1, 2, 4} {
		b.Run(fmt.Sprint("slots=", slots), func(b *testing.B) {
			benchPipeline(b, c.benchTrial(b), pipeline{actors: 2, ring: 64, slots: slots})
		})
	}
}

// BenchmarkPipelineTransport is 2 actors of 64 environments with inference
// over shared memory (the default between processes of one node), over
// ipc:// (DISTRL_SHM=0) and over tcp on the loopback (DISTRL_SHM=0 and
// DISTRL_IPC=0 keep the servers from advertising either). Samples go over
// ipc, or tcp in the last.
func BenchmarkPipelineTransport(b *testing.B) {
	c := newCluster(b)
	for _, tc := range []struct {
		transport string
		env       []string
	}{
		{"shm", nil},
		{"ipc", []string{shm.Env + "=0"}},
		{"tcp", []string{shm.Env + "=0", zsock.IPCEnv + "=0"}},
	} {
		b.Run(tc.transport, func(b *testing.B) {
			sub := c.benchTrial(b)
			sub.env = append(sub.env, tc.env...)
			benchPipeline(b, sub, pipeline{actors: 2, ring: 64})
		})
	}
}

// benchTrial returns a cluster on c's name server, for tb, in a trial of
// its own: the processes of an earlier sub-benchmark were killed, but their
// records outlive them until their leases expire, and must not be found.
func (c *cluster) benchTrial(tb testing.TB) *cluster {
	trialSeq.Lock()
	trialSeq.n++
	n := trialSeq.n
	trialSeq.Unlock()
	sub := *c
	sub.t = tb
	sub.trial = names.NewTrial(c.trial.Experiment, fmt.Sprintf("t%d", n))
	sub.env = make([]string, 0, len(c.env))
	for _, kv := range c.env {
		if strings.HasPrefix(kv, "RLCTL_TRIAL=") {
			kv = "RLCTL_TRIAL=" + sub.trial.Trial
		}
		sub.env = append(sub.env, kv)
	}
	return &sub
}

// pipelineStats are the fields of the "stats" replies the pipeline
// benchmarks read; each worker type fills the ones it has.
type pipelineStats struct {
	Uptime   float64 `msgpack:"uptime_s"`
	BusyFrac float64 `msgpack:"poll_busy_frac"` // of the uptime, spent in Poll
	Spun     int64   `msgpack:"spun_waits"`     // waits ended by input found in memory
	// actor
	EnvSteps          int64 `msgpack:"env_steps"`
	InferenceMessages int64 `msgpack:"inference_messages"`
	InferenceBytes    int64 `msgpack:"inference_bytes"`
	InferenceFailures int64 `msgpack:"inference_failures"`
	SampleMessages    int64 `msgpack:"sample_messages"`
	RingSlots         int64 `msgpack:"ring_slots"`
	Backpressure      int64 `msgpack:"backpressure"`
	// policy worker
	Rows    int64 `msgpack:"rows"`
	Batches int64 `msgpack:"batches"`
	// sink
	Steps     int64 `msgpack:"steps"`
	Malformed int64 `msgpack:"malformed"`
	Bytes     int64 `msgpack:"bytes"`
}

func (s pipelineStats) busy() float64 { return s.BusyFrac * s.Uptime }

// pipeline is the shape of a pipeline benchmark: `actors` actors with
// `ring` environments each stepped in `slots` slots (0: the default), and
// the policy worker's configuration beyond env and seed (a device, a
// network) and binary ("": rlctl).
type pipeline struct {
	actors, ring, slots int
	policies            int // policy worker processes; 0 is 1
	// colocate: each actor's process hosts policy worker i too (rlctl
	// worker --with policy, a group's colocate); policies is then actors.
	colocate     bool
	policy       map[string]any
	policyBinary string
	// sinks are sink processes; 0: experiment.AutoSinks, one per 4 actors
	// (cartpole-sink's count: auto).
	sinks int
	// episodeBatches cuts the actors' batches at every episode's end;
	// otherwise they span episodes (span_episodes, as in cartpole-sink).
	episodeBatches bool
}

// benchPipeline starts the processes of pipeline p in c's trial and
// measures it.
func benchPipeline(b *testing.B, c *cluster, p pipeline) {
	actors, ring, slots, policies := p.actors, p.ring, p.slots, max(p.policies, 1)
	if p.colocate {
		policies = actors
	}
	sinks := cmp.Or(p.sinks, experiment.AutoSinks(actors))
	ctx := ctxFor(b, time.Minute+time.Duration(b.N)*pipelineWindow)
	// procs: the policy workers, the sinks, the actors, in that order.
	var procs []*proc
	policyNames := make([]string, policies)
	for j := range policies {
		if !p.colocate {
			procs = append(procs, c.workerOf(cmp.Or(p.policyBinary, rlctl), "policy", j))
		}
		policyNames[j] = names.WorkerName("policy", j)
	}
	firstSinkProc := len(procs)
	sinkNames := make([]string, sinks)
	for j := range sinks {
		procs = append(procs, c.worker("sink", j))
		sinkNames[j] = names.WorkerName("sink", j)
	}
	firstActorProc := len(procs)
	actorNames := make([]string, actors)
	for i := range actors {
		if p.colocate {
			procs = append(procs, c.worker("actor", i, "--with", "policy"))
		} else {
			procs = append(procs, c.worker("actor", i))
		}
		actorNames[i] = names.WorkerName("actor", i)
	}
	// The harness kills the processes when the sub-benchmark ends; Go may
	// call this function again before that (a -benchtime longer than a
	// window), and the next run must not compete with these for the CPU.
	defer func() {
		for _, p := range procs {
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	}()
	panel := c.panel()
	servers := slices.Concat(policyNames, sinkNames)
	all := append(slices.Clone(servers), actorNames...)
	if err := panel.Connect(ctx, all...); err != nil {
		b.Fatal(err)
	}

	// The policy workers and the sinks first, so that the actors find their
	// endpoints at once; every kwarg as msgpack, through the panel.
	serverKw := make([]any, 0, len(servers))
	for range policies {
		kw := map[string]any{"env": env.CartPoleName, "seed": 0}
		maps.Copy(kw, p.policy)
		serverKw = append(serverKw, kw)
	}
	for range sinks {
		serverKw = append(serverKw, map[string]any{"stream": "default"})
	}
	mustGroup(b, panel.GroupRequestEach(ctx, servers, member.CmdConfigure, serverKw))
	mustGroup(b, panel.GroupRequest(ctx, servers, member.CmdStart, nil))
	kwargs := make([]any, actors)
	for i := range kwargs {
		kw := map[string]any{
			"env": env.CartPoleName, "ring_size": ring, "inference": "remote", "seed": i,
			// The ring measured: over ipc or tcp (BenchmarkPipelineTransport)
			// it would otherwise grow while it waits for actions.
			"ring_max": ring,
			// A sink's queue may be deep: nothing it is sent goes stale
			// (as in the cartpole-sink built-in).
			"sample_queue":  64,
			"span_episodes": !p.episodeBatches,
		}
		if slots > 0 {
			kw["ring_slots"] = slots
		}
		kwargs[i] = kw
	}
	mustGroup(b, panel.GroupRequestEach(ctx, actorNames, member.CmdConfigure, kwargs))
	mustGroup(b, panel.GroupRequest(ctx, actorNames, member.CmdStart, nil))

	stats := func() (map[string]pipelineStats, time.Time) {
		at := time.Now()
		out := map[string]pipelineStats{}
		for _, r := range panel.GroupRequest(ctx, all, member.CmdStats, nil) {
			var s pipelineStats
			if err := r.Decode(&s); err != nil {
				b.Fatalf("%s stats: %v", r.Worker, err)
			}
			out[r.Worker] = s
		}
		return out, at
	}
	eventually.NoError(b, 30*time.Second, "every actor steps", func() error {
		s, _ := stats()
		for _, a := range actorNames {
			if s[a].EnvSteps == 0 {
				return fmt.Errorf("%s has not stepped", a)
			}
		}
		return nil
	})
	time.Sleep(pipelineWarmup)

	cpu0 := procsCPU(b, procs)
	before, t0 := stats()
	b.ResetTimer()
	time.Sleep(time.Duration(b.N) * pipelineWindow)
	b.StopTimer()
	after, t1 := stats()
	cpu1 := procsCPU(b, procs)
	window := t1.Sub(t0).Seconds()

	var steps, failures, backpressure, msgs, sampleMsgs, bytes, actorSpun int64
	var actorBusy, ringSlots float64
	for _, a := range actorNames {
		ringSlots += float64(after[a].RingSlots) / float64(actors)
		steps += after[a].EnvSteps - before[a].EnvSteps
		msgs += after[a].InferenceMessages - before[a].InferenceMessages
		sampleMsgs += after[a].SampleMessages - before[a].SampleMessages
		bytes += after[a].InferenceBytes - before[a].InferenceBytes
		failures += after[a].InferenceFailures - before[a].InferenceFailures
		backpressure += after[a].Backpressure - before[a].Backpressure
		actorSpun += after[a].Spun - before[a].Spun
		actorBusy += (after[a].busy() - before[a].busy()) / window
	}
	// The policy workers' figures, summed (busy: averaged below).
	var pb, pa pipelineStats
	for _, w := range policyNames {
		pb.Batches, pa.Batches = pb.Batches+before[w].Batches, pa.Batches+after[w].Batches
		pb.Rows, pa.Rows = pb.Rows+before[w].Rows, pa.Rows+after[w].Rows
		pb.Spun, pa.Spun = pb.Spun+before[w].Spun, pa.Spun+after[w].Spun
	}
	var policyBusy float64
	for _, w := range policyNames {
		policyBusy += (after[w].busy() - before[w].busy()) / window / float64(policies)
	}
	var sb, sa pipelineStats // the sinks', summed
	for _, w := range sinkNames {
		sb.Steps, sa.Steps = sb.Steps+before[w].Steps, sa.Steps+after[w].Steps
		sb.Bytes, sa.Bytes = sb.Bytes+before[w].Bytes, sa.Bytes+after[w].Bytes
		sb.Malformed, sa.Malformed = sb.Malformed+before[w].Malformed, sa.Malformed+after[w].Malformed
	}
	b.ReportMetric(0, "ns/op")
	b.ReportMetric(float64(steps)/window, "steps/s")
	if n := pa.Batches - pb.Batches; n > 0 {
		b.ReportMetric(float64(pa.Rows-pb.Rows)/float64(n), "rows/infer")
		b.ReportMetric(float64(pa.Spun-pb.Spun)/float64(n), "policy-spun/batch")
	}
	if msgs > 0 {
		b.ReportMetric(float64(actorSpun)/float64(msgs), "actor-spun/req")
	}
	b.ReportMetric(actorBusy/float64(actors), "actor-busy")
	b.ReportMetric(ringSlots, "ring-slots")
	b.ReportMetric(policyBusy, "policy-busy")
	b.ReportMetric(float64(sa.Steps-sb.Steps)/window, "sink-steps/s")
	if steps > 0 {
		// CPU time of the processes (every thread, libzmq's too) per step:
		// on a machine of C cores the pipeline cannot pass C/cpu steps/s,
		// however its work overlaps.
		// Colocated, the actors' processes' CPU holds their policy
		// workers' too (policy-cpu-us/step is then 0).
		var actorCPU, policyCPU, sinkCPU time.Duration
		for i := range procs {
			d := cpu1[i] - cpu0[i]
			switch {
			case i >= firstActorProc:
				actorCPU += d
			case i >= firstSinkProc:
				sinkCPU += d
			default:
				policyCPU += d
			}
		}
		perStep := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(steps) }
		b.ReportMetric(perStep(actorCPU+policyCPU+sinkCPU), "cpu-us/step")
		b.ReportMetric(perStep(actorCPU), "actor-cpu-us/step")
		b.ReportMetric(perStep(policyCPU), "policy-cpu-us/step")
		b.ReportMetric(perStep(sinkCPU), "sink-cpu-us/step")
		// Requests and samples; replies are about as large as requests.
		b.ReportMetric(float64(msgs)/float64(steps), "req-msgs/step")
		b.ReportMetric(float64(sampleMsgs)/float64(steps), "sample-msgs/step")
		b.ReportMetric(float64(bytes+sa.Bytes-sb.Bytes)/float64(steps), "bytes/step")
	}
	if failures > 0 || backpressure > 0 || sa.Malformed > 0 {
		b.Logf("in the window: %d inference failures, %d batches refused with back-pressure; %d malformed at the sinks",
			failures, backpressure, sa.Malformed)
	}
}

// procsCPU is the CPU time (user and system, all threads) each of procs
// has used so far, from /proc/{pid}/stat, in clock ticks of 10 ms.
func procsCPU(b *testing.B, procs []*proc) []time.Duration {
	b.Helper()
	out := make([]time.Duration, len(procs))
	for i, p := range procs {
		stat := readFile(b, fmt.Sprintf("/proc/%d/stat", p.cmd.Process.Pid))
		// The fields after the command name, which is in parentheses and
		// may hold spaces: state is the first, utime the 12th, stime the
		// 13th.
		f := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
		if len(f) < 13 {
			b.Fatalf("%s: /proc stat has %d fields after the name", p.name, len(f))
		}
		var utime, stime int64
		if _, err := fmt.Sscan(f[11], &utime); err != nil {
			b.Fatalf("%s: utime %q: %v", p.name, f[11], err)
		}
		if _, err := fmt.Sscan(f[12], &stime); err != nil {
			b.Fatalf("%s: stime %q: %v", p.name, f[12], err)
		}
		out[i] = time.Duration(utime+stime) * 10 * time.Millisecond // USER_HZ is 100 on Linux
	}
	return out
}

// mustGroup fails the benchmark if any worker of a group request failed.
func mustGroup(b *testing.B, results []panel.Result) {
	b.Helper()
	for _, r := range results {
		if r.Err != nil {
			b.Fatal(r.Err)
		}
	}
}

// BenchmarkSingleLoopLimit is the limit the pipeline benchmarks are held
// against: one loop on one goroutine in this process, no network, no
// processes. Each turn it gathers the observations of `ring` CartPole-v1
// environments into one batch, runs policy.ActorCritic.Infer on it (the
// network of the policy worker: policy.ConfigForEnv with seed 0), steps
// every environment with its action and resets the finished ones. It does
// no sample batching either, so it is the cost of simulation and inference
// alone. ring=16 and ring=32 are the batches that 2 and 4 actors of ring 8
// would give the policy worker if their requests always met.
//
// Unlike the pipeline it is an ordinary benchmark: b.N is a number of
// environment steps, so -benchtime applies as usual.
func BenchmarkSingleLoopLimit(b *testing.B) {
	if err := env.Register(); err != nil {
		b.Fatal(err)
	}
	cfg, err := policy.ConfigForEnv(env.CartPoleName, nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg.Seed = 0
	for _, ring := range []int{1, 2, 8, 16, 32, 64, 128, 256, 512, 1024} {
		b.Run(fmt.Sprint("ring=", ring), func(b *testing.B) {
			p, err := policy.New(cfg)
			if err != nil {
				b.Fatal(err)
			}
			envs := make([]api.Env, ring)
			obs := api.NewTensor[float32](ring, cfg.ObsDim)
			episodes := int64(0)
			for i := range envs {
				if envs[i], err = api.NewEnv(env.CartPoleName, nil); err != nil {
					b.Fatal(err)
				}
				o, err := envs[i].Reset(episodes)
				if err != nil {
					b.Fatal(err)
				}
				episodes++
				copy(obs.Row(i), o[0])
			}
			var out api.Inference
			actions := make([]api.Action, 1)
			var steps int64
			b.ResetTimer()
			for steps < int64(b.N) {
				if err := p.Infer(obs, &out); err != nil {
					b.Fatal(err)
				}
				for i, e := range envs {
					actions[0].Discrete = out.Actions.Data[i]
					st, err := e.Step(actions)
					if err != nil {
						b.Fatal(err)
					}
					steps++
					o := st.Obs[0]
					if st.Done() {
						first, err := e.Reset(episodes)
						if err != nil {
							b.Fatal(err)
						}
						episodes++
						o = first[0]
					}
					copy(obs.Row(i), o)
				}
			}
			b.ReportMetric(float64(steps)/b.Elapsed().Seconds(), "steps/s")
		})
	}
}
