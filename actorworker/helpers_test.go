package actorworker_test

import (
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/distrl/distrl/actorworker"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/stream"

	"github.com/distrl/distrl/internal/testsupport/workertest"
)

// TestMain registers the environments the tests' workers name, as rlctl
// does at start.
func TestMain(m *testing.M) { workertest.Main(m) }

// valueOf is the probe policy's value estimate: 1000 plus the sum of the
// observation, so a test can recompute the value of any observation it
// sees, and a value is never 0 (a bootstrap of 0 then means "terminated").
func valueOf(obs []float32) float32 {
	v := float32(1000)
	for _, x := range obs {
		v += x
	}
	return v
}

// probeVersion is the version the probe policy reports.
const probeVersion = 7

// probePolicy is an api.Policy whose answers are a function of the
// observation: reproducible, and checkable from the batches alone. Its
// action is chosen from the low bits of the observation, which makes
// CartPole episodes of varied length (some terminate, some hit the limit).
type probePolicy struct {
	actions int // size of the discrete action space
	calls   int
}

func (p *probePolicy) Infer(obs api.Tensor[float32], out *api.Inference) error {
	p.calls++
	n := obs.Shape[0]
	for _, err := range []error{out.Actions.Resize(n), out.LogProbs.Resize(n), out.Values.Resize(n)} {
		if err != nil {
			return err
		}
	}
	for i := range n {
		row := obs.Row(i)
		out.Actions.Data[i] = actionOf(row, p.actions)
		out.LogProbs.Data[i] = -0.5
		out.Values.Data[i] = valueOf(row)
	}
	out.Version = probeVersion
	return nil
}

func (p *probePolicy) Version() int64 { return probeVersion }

func actionOf(obs []float32, actions int) int32 {
	var h uint32
	for _, x := range obs {
		h = h*31 + math.Float32bits(x)>>7
	}
	return int32(h % uint32(actions))
}

// collector is a stream.SamplePoster that keeps copies of what it accepts. It
// refuses a post with back-pressure while refuse says so.
type collector struct {
	batches []api.SampleBatch
	refuse  func(post int) bool // post counts every call, from 0
	posts   int
	refused int
}

func (c *collector) Buffered() int { return 0 }

func (c *collector) Post(b *api.SampleBatch) error {
	n := c.posts
	c.posts++
	if c.refuse != nil && c.refuse(n) {
		c.refused++
		return fmt.Errorf("collector: %w", stream.ErrBackpressure)
	}
	if err := b.Validate(); err != nil {
		return err
	}
	// The agent reuses an accepted batch's arrays: keep a deep copy.
	cp := *b
	cp.Obs.Data, cp.Actions.Data = slices.Clone(b.Obs.Data), slices.Clone(b.Actions.Data)
	cp.ContActions.Data, cp.Rewards.Data = slices.Clone(b.ContActions.Data), slices.Clone(b.Rewards.Data)
	cp.Terminated.Data, cp.Truncated.Data = slices.Clone(b.Terminated.Data), slices.Clone(b.Truncated.Data)
	cp.LogProbs.Data, cp.Values.Data = slices.Clone(b.LogProbs.Data), slices.Clone(b.Values.Data)
	cp.Episodes = slices.Clone(b.Episodes)
	c.batches = append(c.batches, cp)
	return nil
}

func (c *collector) Flush()          {}
func (c *collector) Warning() string { return "" }
func (c *collector) Close() error    { return nil }

// byAgent groups the batches by agent, keeping their order.
func (c *collector) byAgent() map[string][]api.SampleBatch {
	m := map[string][]api.SampleBatch{}
	for _, b := range c.batches {
		m[b.AgentID] = append(m[b.AgentID], b)
	}
	return m
}

// versionedClient gives each result the policy version its schedule says
// for the request, as if the policy worker had taken new parameters, and
// remembers which version answered each observation (CartPole's states
// do not repeat).
type versionedClient struct {
	stream.InferenceClient
	schedule func(id stream.ReqID) int64
	posted   map[stream.ReqID]string // observations of requests not consumed
	versions map[string]int64        // observation -> its result's version
}

func obsKey(obs []float32) string { return fmt.Sprint(obs) }

func (c *versionedClient) Post(obs []float32) (stream.ReqID, error) {
	id, err := c.InferenceClient.Post(obs)
	if err == nil {
		c.posted[id] = obsKey(obs)
	}
	return id, err
}

func (c *versionedClient) Consume(id stream.ReqID) (stream.InferenceResult, error) {
	res, err := c.InferenceClient.Consume(id)
	if err == nil {
		res.Version = c.schedule(id)
		c.versions[c.posted[id]] = res.Version
	}
	delete(c.posted, id)
	return res, err
}

// versionOf is the version of the result that answered obs.
func (c *versionedClient) versionOf(obs []float32) int64 { return c.versions[obsKey(obs)] }

// recordingEnv is a real environment that also remembers the final
// observation of every episode, in order, and logs its steps.
type recordingEnv struct {
	api.Env
	index    int
	log      *[]int // target indices in stepping order; may be nil
	finalObs [][][]float32
	ends     int
	acted    []int64 // steps each agent acted in (all, without turns)
}

// Acting forwards the environment's turns (api.Turns); nil without.
func (e *recordingEnv) Acting() []bool {
	if t, ok := e.Env.(api.Turns); ok {
		return t.Acting()
	}
	return nil
}

func (e *recordingEnv) Step(actions []api.Action) (api.Step, error) {
	if e.acted == nil {
		e.acted = make([]int64, len(actions))
	}
	acting := e.Acting()
	for i := range actions {
		if api.IsActing(acting, i) {
			e.acted[i]++
		}
	}
	s, err := e.Env.Step(actions)
	if err != nil {
		return s, err
	}
	if e.log != nil {
		*e.log = append(*e.log, e.index)
	}
	if s.Done() {
		e.ends++
		obs := make([][]float32, len(s.Obs))
		for i, o := range s.Obs {
			obs[i] = slices.Clone(o)
		}
		e.finalObs = append(e.finalObs, obs)
	}
	return s, nil
}

func newEnv(t testing.TB, name string, cfg map[string]any) api.Env {
	t.Helper()
	if err := env.Register(); err != nil {
		t.Fatal(err)
	}
	e, err := api.NewEnv(name, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// rig is a ring of targets on recording environments, driven as the
// worker drives it, with inline inference by the probe policy.
type rig struct {
	client stream.InferenceClient
	ring   *actorworker.EnvRing
	envs   []*recordingEnv
	outs   []*collector // per target
	log    []int
	// versioned is the client's wrapper when rigConfig.versions is set.
	versioned *versionedClient
}

type rigConfig struct {
	env         string
	envConfig   map[string]any
	ringSize    int
	sampleSteps int
	span        bool // span_episodes
	versionCuts bool // version_cuts
	actions     int
	// versions, if set, is the policy version of request id's result, in
	// place of the probe policy's (versionedClient).
	versions func(id stream.ReqID) int64
	// wrap, if set, wraps the inline client (to inject failures).
	wrap func(stream.InferenceClient) stream.InferenceClient
	// refuse, if set, makes the producers refuse posts with back-pressure.
	refuse func(post int) bool
}

func newRig(t *testing.T, cfg rigConfig) *rig {
	t.Helper()
	r := &rig{}
	var targets []*actorworker.EnvTarget
	for i := range cfg.ringSize {
		e := &recordingEnv{Env: newEnv(t, cfg.env, cfg.envConfig), index: i, log: &r.log}
		if r.client == nil {
			r.client = stream.NewInlineInferenceClient(&probePolicy{actions: cfg.actions}, e.ObservationSpace().Size())
			if cfg.wrap != nil {
				r.client = cfg.wrap(r.client)
			}
			if cfg.versions != nil {
				r.versioned = &versionedClient{InferenceClient: r.client, schedule: cfg.versions,
					posted: map[stream.ReqID]string{}, versions: map[string]int64{}}
				r.client = r.versioned
			}
		}
		out := &collector{refuse: cfg.refuse}
		r.outs = append(r.outs, out)
		tg, err := actorworker.NewEnvTarget(e, i, actorworker.TargetConfig{
			Client: r.client, Producer: out, Policy: "p", ActorID: "actor/0",
			SampleSteps: cfg.sampleSteps, SpanEpisodes: cfg.span, VersionCuts: cfg.versionCuts, Seed: 1,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { tg.Close() })
		if err := tg.Reset(t.Context(), actorworker.EnvSeed(1, i, 0)); err != nil {
			t.Fatal(err)
		}
		targets = append(targets, tg)
		r.envs = append(r.envs, e)
	}
	t.Cleanup(func() { r.client.Close() })
	r.ring = actorworker.NewEnvRing(targets...)
	r.flush(t)
	return r
}

func (r *rig) flush(t *testing.T) {
	t.Helper()
	if err := r.client.Flush(t.Context()); err != nil {
		t.Fatal(err)
	}
}

// poll is one poll of the worker loop: replies, a turn of the ring, flush.
func (r *rig) poll(t *testing.T) (steps int) {
	t.Helper()
	if err := r.client.Poll(); err != nil {
		t.Fatal(err)
	}
	for _, tg := range r.ring.Targets() {
		if _, err := tg.Send(); err != nil {
			t.Fatal(err)
		}
	}
	for range r.ring.Len() {
		if tg := r.ring.Current(); tg.ReadyToStep() {
			n, err := tg.Step(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			steps += n
		}
		r.ring.Rotate()
	}
	r.flush(t)
	return steps
}

// run polls until the ring took at least envSteps environment steps, then
// drains it.
func (r *rig) run(t *testing.T, envSteps int64) {
	t.Helper()
	for polls := 0; r.envSteps() < envSteps; polls++ {
		if polls > 100*int(envSteps) {
			t.Fatalf("no progress: %d env steps after %d polls", r.envSteps(), polls)
		}
		r.poll(t)
	}
	r.drain(t)
}

func (r *rig) drain(t *testing.T) {
	t.Helper()
	for _, tg := range r.ring.Targets() {
		tg.Drain()
	}
	for polls := 0; !r.allDone(); polls++ {
		if polls > 10000 {
			t.Fatal("ring did not drain")
		}
		r.poll(t)
	}
}

func (r *rig) allDone() bool {
	for _, tg := range r.ring.Targets() {
		if !tg.AllDone() {
			return false
		}
	}
	return true
}

func (r *rig) envSteps() int64 {
	var n int64
	for _, tg := range r.ring.Targets() {
		n += tg.Stats().EnvSteps
	}
	return n
}

// terminatesInside reports whether an episode of b terminated before its
// last step: the batch spans episodes.
func terminatesInside(b api.SampleBatch) bool {
	return slices.Contains(b.Terminated.Data[:b.Len()-1], 1)
}

// obsRow is observation i of b, whatever an observation's shape.
func obsRow(b api.SampleBatch, i int) []float32 {
	d := b.Obs.Len() / b.Len()
	return b.Obs.Data[i*d : (i+1)*d]
}

// batchRules are what an agent's batches must follow.
type batchRules struct {
	actions, sampleSteps int
	span                 bool // span_episodes
	// versionOf, if set, is the policy version that chose the action at an
	// observation (versionedClient); nil: every step's is probeVersion.
	versionOf func(obs []float32) int64
	// versionCuts: a batch ends where a newer version than all its steps
	// acts next, so a batch cut short holds one version.
	versionCuts bool
}

// checkBatches checks one agent's batches from one target: well formed,
// cut where the rules say (span: carried on across terminations; version
// cuts: at a newer version), with the right bootstrap values and policy
// versions, values that belong to their observations, and every episode
// accounted for. finalObs are the agent's final observations of the
// target's episodes.
func checkBatches(t *testing.T, batches []api.SampleBatch, finalObs [][]float32, rules batchRules, wantSteps, wantEpisodes int64) {
	t.Helper()
	versionOf := func(obs []float32) int64 { return probeVersion }
	if rules.versionOf != nil {
		versionOf = rules.versionOf
	}
	// newerNext: the batch after k starts with a newer version than any
	// step of k, which ends k early where versions cut.
	newerNext := func(k int, newest int64) bool {
		return rules.versionCuts && k+1 < len(batches) && versionOf(obsRow(batches[k+1], 0)) > newest
	}
	sampleSteps, span := rules.sampleSteps, rules.span
	var steps, episodes int64
	finals := 0
	for k, b := range batches {
		if err := b.Validate(); err != nil {
			t.Fatalf("batch %d: %v", k, err)
		}
		n := b.Len()
		if n == 0 || n > sampleSteps {
			t.Fatalf("batch %d has %d steps, want 1..%d", k, n, sampleSteps)
		}
		steps += int64(n)
		episodes += int64(len(b.Episodes))
		oldest, newest := int64(math.MaxInt64), int64(math.MinInt64)
		for i := range n {
			v := versionOf(obsRow(b, i))
			oldest, newest = min(oldest, v), max(newest, v)
		}
		if b.PolicyVersion != oldest {
			t.Errorf("batch %d: policy version %d, want its oldest step's %d", k, b.PolicyVersion, oldest)
		}
		if rules.versionCuts && rules.versionOf != nil {
			// A newer version acting ends the batch, so within one the
			// versions never rise past the first step's.
			if first := versionOf(obsRow(b, 0)); newest != first {
				t.Errorf("batch %d: steps of versions up to %d after a first step of %d, want a cut at the newer version", k, newest, first)
			}
		}
		for i := range n {
			obs := obsRow(b, i)
			if got, want := b.Values.Data[i], valueOf(obs); got != want {
				t.Fatalf("batch %d step %d: value %v, want the value of its observation %v", k, i, got, want)
			}
			if got, want := b.Actions.Data[i], actionOf(obs, rules.actions); got != want {
				t.Fatalf("batch %d step %d: action %d, want the policy's %d", k, i, got, want)
			}
		}
		// Every episode end cuts a batch, so only the last step may end
		// one; spanning, every truncation does, and terminations go on.
		for i := range n - 1 {
			term, trunc := b.Terminated.Data[i] == 1, b.Truncated.Data[i] == 1
			switch {
			case span && term:
				finals++
			case term || trunc:
				t.Fatalf("batch %d: episode ends at step %d of %d (terminated=%v, span_episodes=%v), want the batch cut there",
					k, i, n, term, span)
			}
		}
		last := n - 1
		term, trunc := b.Terminated.Data[last] == 1, b.Truncated.Data[last] == 1
		var want float32
		switch {
		case term:
			want = 0
			finals++
			if span && n != sampleSteps && k+1 < len(batches) && !newerNext(k, newest) {
				t.Errorf("batch %d of %d steps ends in a termination, want spanning batches cut there only when full (%d)", k, n, sampleSteps)
			}
		case trunc:
			if finals >= len(finalObs) {
				t.Fatalf("batch %d: truncated episode %d, but the env ended only %d", k, finals, len(finalObs))
			}
			want = valueOf(finalObs[finals])
			finals++
		case k+1 < len(batches):
			// Cut mid-episode: the next batch starts at the next observation.
			want = valueOf(obsRow(batches[k+1], 0))
			if n != sampleSteps && !newerNext(k, newest) {
				t.Errorf("batch %d cut mid-episode at %d steps, want %d or a newer version next", k, n, sampleSteps)
			}
		default:
			// The last batch, cut by Drain: some value, never 0.
			want = b.BootstrapValue
			if want == 0 {
				t.Errorf("last batch (drained): bootstrap 0 but it did not terminate")
			}
		}
		if b.BootstrapValue != want {
			t.Errorf("batch %d (len %d, terminated=%v truncated=%v): bootstrap %v, want %v", k, n, term, trunc, b.BootstrapValue, want)
		}
		if (b.BootstrapValue == 0) != term {
			t.Errorf("batch %d: bootstrap %v with terminated=%v", k, b.BootstrapValue, term)
		}
	}
	if steps != wantSteps {
		t.Errorf("batches hold %d steps, the agent took %d", steps, wantSteps)
	}
	if episodes != wantEpisodes {
		t.Errorf("batches report %d episodes, %d finished", episodes, wantEpisodes)
	}
	if finals != len(finalObs) {
		t.Errorf("batches mark %d episode ends, the env ended %d episodes", finals, len(finalObs))
	}
}
