package actorworker

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker/member"
	"github.com/vmihailenco/msgpack/v5"
)

// AgentMapping is one entry of the actor's agents key: the agents it
// matches act for Policy, whose requests go to that policy's workers (or
// its inline network) and whose batches, labelled with it, go to its own
// sample stream or replay. Zero values take the actor's settings.
type AgentMapping struct {
	// Match is a regular expression matched against the whole agent id
	// (anchored); Indices are the agents' positions in the environment's
	// agent list instead. Exactly one of them.
	Match   string `msgpack:"match"`
	Indices []int  `msgpack:"indices"`
	// Policy is required.
	Policy string `msgpack:"policy"`
	// SampleStream defaults to the policy's name; "null" discards.
	SampleStream string `msgpack:"sample_stream"`
	// ReplayStream (and ReplayTable) send the mapping's steps into a
	// replay as the actor-level keys do, in place of a sample stream.
	ReplayStream string `msgpack:"replay_stream"`
	ReplayTable  string `msgpack:"replay_table"`
	SampleSteps  int    `msgpack:"sample_steps"`
	// Epsilon, unset, is the actor's (or its apex_actors epsilon).
	Epsilon *float64 `msgpack:"epsilon"`
	// Inference, "", is the actor's mode.
	Inference string `msgpack:"inference"`
	// Deterministic (inline only), unset, is the actor's.
	Deterministic *bool `msgpack:"deterministic"`
	// Pool makes the agents play kept versions of a policy, one drawn per
	// agent per episode, inline (self-play's opponents).
	Pool *PoolMapping `msgpack:"pool"`
}

// AgentMappings is the agents key. It decodes each mapping on its own, so
// that a misspelt or mistyped key is refused naming the mapping it is in.
type AgentMappings []AgentMapping

// mappingKeys says what each key of a mapping takes, for errors.
var mappingKeys = map[string]string{
	"match": "a string", "indices": "a list of integers", "policy": "a string", "sample_stream": "a string",
	"replay_stream": "a string", "replay_table": "a string", "sample_steps": "an integer", "epsilon": "a number",
	"inference": "a string", "deterministic": "true or false", "pool": "a mapping (policy, tag, last, timeout_ms)",
}

// DecodeMsgpack implements msgpack.CustomDecoder.
func (m *AgentMappings) DecodeMsgpack(d *msgpack.Decoder) error {
	var raws []msgpack.RawMessage
	if err := d.Decode(&raws); err != nil {
		return err
	}
	out := make(AgentMappings, len(raws))
	for i, raw := range raws {
		if err := decodeMapping(raw, &out[i]); err != nil {
			return fmt.Errorf("agents[%d]: %s", i, err)
		}
	}
	*m = out
	return nil
}

// decodeMapping decodes one mapping strictly; an error says which key is
// wrong, and in words rather than the decoder's.
func decodeMapping(raw msgpack.RawMessage, m *AgentMapping) error {
	strict := func(b []byte, v any) error {
		dec := msgpack.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields(true)
		return dec.Decode(v)
	}
	err := strict(raw, m)
	if err == nil {
		return nil
	}
	var kv map[string]msgpack.RawMessage
	if msgpack.Unmarshal(raw, &kv) != nil {
		return errors.New("want a mapping (match or indices, policy, ...)")
	}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		want, known := mappingKeys[k]
		if !known {
			return fmt.Errorf("unknown key %q (known: %s)", k, strings.Join(slices.Sorted(maps.Keys(mappingKeys)), ", "))
		}
		one, _ := msgpack.Marshal(map[string]msgpack.RawMessage{k: kv[k]})
		if strict(one, new(AgentMapping)) != nil {
			var v any
			_ = msgpack.Unmarshal(kv[k], &v)
			return fmt.Errorf("key %q: want %s, got %#v", k, want, v)
		}
	}
	return errors.New(strings.TrimPrefix(err.Error(), "msgpack: "))
}

// routeSpec is a mapping resolved against the actor's settings: what
// build makes a route of. Without the agents key the actor has one, of
// every agent to the actor-level policy, so that one policy and several
// take the same path.
type routeSpec struct {
	where         string // "agents[i]: ", or "" for the actor-level mapping
	policy        string
	sampleStream  string // "" with a replay
	replayStream  string
	replayTable   string
	sampleSteps   int
	versionCuts   bool // batches end at a newer policy version (a sample stream's)
	epsilon       float64
	inference     string
	deterministic bool
	seed          int64 // the inline network's and exploration's
	pool          *PoolMapping
	match         *regexp.Regexp
	indices       []int
	// inline is the policy's network, on the first mapping of an inline
	// policy (parseConfig builds it, so that a bad one is refused there).
	inline api.Policy
}

// streamKey names the producer the mapping sends through: mappings with
// equal keys share one.
func (s *routeSpec) streamKey() string {
	if s.replayStream != "" {
		return "replay " + s.replayStream + "/" + cmp.Or(s.replayTable, "default")
	}
	return "sample " + s.sampleStream
}

// streamDesc is the producer as a user names it.
func (s *routeSpec) streamDesc() string {
	if s.replayStream != "" {
		return fmt.Sprintf("replay stream %q table %q", s.replayStream, cmp.Or(s.replayTable, "default"))
	}
	return fmt.Sprintf("sample stream %q", s.sampleStream)
}

// takes reports whether the mapping matches agent i, whose id is id.
func (s *routeSpec) takes(i int, id string) bool {
	if s.match != nil {
		return s.match.MatchString(id)
	}
	return slices.Contains(s.indices, i)
}

// routeSpecs resolves cfg's agents mappings (or, without them, the one
// mapping of every agent to the actor-level policy) against the actor's
// settings and the environment's agents ids, and builds the inline
// networks. Errors are bad_arguments naming the mapping.
func routeSpecs(cfg Config, ids []string) ([]routeSpec, error) {
	mappings, where := cfg.Agents, "agents[%d]: "
	if len(mappings) == 0 {
		// The actor-level keys are the one mapping's, which takes every
		// agent. As before agents existed, a replay_stream overrides the
		// (defaulted) sample_stream, and replay_table alone is ignored.
		m := AgentMapping{Match: "(?s:.*)", Policy: cfg.Policy, SampleStream: cfg.SampleStream}
		if cfg.ReplayStream != "" {
			m.SampleStream, m.ReplayStream, m.ReplayTable = "", cfg.ReplayStream, cfg.ReplayTable
		}
		mappings, where = AgentMappings{m}, ""
	}
	specs := make([]routeSpec, len(mappings))
	for i, m := range mappings {
		s := &specs[i]
		if where != "" {
			s.where = fmt.Sprintf(where, i)
		}
		if err := s.resolve(m, cfg, i, len(ids)); err != nil {
			return nil, err
		}
	}
	if _, err := assignAgents(specs, ids); err != nil {
		return nil, err
	}
	// Agents of one policy share its client (so their requests batch
	// together) and a policy feeds one learner: its mappings must agree
	// on what the client is and where the batches go.
	for i := range specs {
		s := &specs[i]
		j := slices.IndexFunc(specs[:i], func(o routeSpec) bool { return o.policy == s.policy })
		if j < 0 {
			continue
		}
		o := &specs[j]
		switch {
		case s.streamKey() != o.streamKey():
			return nil, badConfig("%spolicy %q sends to %s here but to %s in agents[%d]: give a policy's mappings one stream",
				s.where, s.policy, s.streamDesc(), o.streamDesc(), j)
		case s.inference != o.inference || (s.inference == InferenceInline && s.deterministic != o.deterministic):
			return nil, badConfig("%spolicy %q has inference %q (deterministic %v) here but %q (deterministic %v) in agents[%d]: a policy's agents share one client",
				s.where, s.policy, s.inference, s.deterministic, o.inference, o.deterministic, j)
		}
	}
	for i := range specs {
		s := &specs[i]
		if s.inference != InferenceInline || slices.IndexFunc(specs[:i], func(o routeSpec) bool { return o.policy == s.policy }) >= 0 {
			continue
		}
		p, err := inlinePolicy(cfg, s.seed, s.deterministic)
		if err != nil {
			return nil, badConfig("%sinline policy: %v", s.where, err)
		}
		s.inline = p
	}
	return specs, nil
}

// resolve checks mapping m, the index-th, of an environment of n agents
// and fills s with it and the actor's defaults.
func (s *routeSpec) resolve(m AgentMapping, cfg Config, index, n int) error {
	switch {
	case (m.Match == "") == (len(m.Indices) == 0):
		return badConfig("%sgive one of match (a regexp of agent ids) and indices", s.where)
	case m.Policy == "":
		return badConfig("%spolicy is required", s.where)
	case m.SampleStream != "" && m.ReplayStream != "":
		return badConfig("%ssample_stream %q and replay_stream %q: give one", s.where, m.SampleStream, m.ReplayStream)
	case m.ReplayTable != "" && m.ReplayStream == "":
		return badConfig("%sreplay_table %q without a replay_stream", s.where, m.ReplayTable)
	case m.SampleSteps < 0:
		return badConfig("%ssample_steps %d, want >= 1, or 0 for the actor's", s.where, m.SampleSteps)
	case m.Epsilon != nil && !(*m.Epsilon >= 0 && *m.Epsilon <= 1):
		return badConfig("%sepsilon %v, want [0, 1]", s.where, *m.Epsilon)
	case m.Inference != "" && m.Inference != InferenceRemote && m.Inference != InferenceInline:
		return badConfig("%sinference %q, want %q or %q", s.where, m.Inference, InferenceRemote, InferenceInline)
	}
	if m.Match != "" {
		// The pattern alone first, so that an error quotes the user's.
		if _, err := regexp.Compile(m.Match); err != nil {
			return badConfig("%smatch %q: %v", s.where, m.Match, err)
		}
		s.match = regexp.MustCompile("^(?:" + m.Match + ")$")
	}
	for _, i := range m.Indices {
		if i < 0 || i >= n {
			return badConfig("%sindex %d, but the environment has %d agents (indices 0 to %d)", s.where, i, n, n-1)
		}
	}
	s.indices = m.Indices
	s.policy = m.Policy
	s.replayStream, s.replayTable = m.ReplayStream, m.ReplayTable
	if s.replayStream == "" {
		s.sampleStream = cmp.Or(m.SampleStream, m.Policy)
	}
	s.sampleSteps = cmp.Or(m.SampleSteps, cfg.SampleSteps)
	// A replay keeps transitions of any version: a cut there would only
	// shorten the n-step returns at it.
	s.versionCuts = *cfg.VersionCuts && s.replayStream == ""
	s.epsilon = cfg.Epsilon
	if m.Epsilon != nil {
		s.epsilon = *m.Epsilon
	}
	s.inference = cmp.Or(m.Inference, cfg.Inference)
	s.deterministic = cfg.Deterministic
	if m.Deterministic != nil {
		s.deterministic = *m.Deterministic
		// A policy worker's own deterministic key decides its actions.
		if s.deterministic && s.inference != InferenceInline && m.Pool == nil {
			return badConfig("%sdeterministic applies to inline inference only (a policy worker's own deterministic key decides remote actions)", s.where)
		}
	}
	// Two inline mappings get different networks; the first has the
	// actor's seed, as the actor-level inline policy does.
	s.seed = *cfg.Seed + int64(index)
	if m.Pool != nil {
		switch {
		case m.Inference == InferenceRemote:
			return badConfig("%spool: a pool's versions play inline, in the actor; leave inference out", s.where)
		case s.epsilon > 0:
			return badConfig("%spool with epsilon %v: a pool's versions play as they were kept", s.where, s.epsilon)
		}
		pool := *m.Pool
		if err := pool.check(s.where, m.Policy); err != nil {
			return err
		}
		s.pool, s.inference = &pool, InferenceInline
	}
	return nil
}

// assignAgents gives each agent (by index) the first mapping that matches
// it. Every agent must be matched, and every mapping must take one.
func assignAgents(specs []routeSpec, ids []string) ([]int, error) {
	assign := make([]int, len(ids))
	taken := make([]bool, len(specs))
	for i, id := range ids {
		assign[i] = slices.IndexFunc(specs, func(s routeSpec) bool { return s.takes(i, id) })
		if assign[i] < 0 {
			return nil, badConfig("agents: agent %q (index %d) is matched by no mapping; every agent of the environment (%s) needs one",
				id, i, strings.Join(ids, ", "))
		}
		taken[assign[i]] = true
	}
	for k := range specs {
		if taken[k] {
			continue
		}
		s := &specs[k]
		var lost []string
		for i, id := range ids {
			if s.takes(i, id) {
				lost = append(lost, fmt.Sprintf("%q went to agents[%d]", id, assign[i]))
			}
		}
		if len(lost) == 0 {
			return nil, badConfig("%smatches none of the agents %s", s.where, strings.Join(quoted(ids), ", "))
		}
		return nil, badConfig("%stakes no agent: an earlier mapping matched each of its agents (%s)", s.where, strings.Join(lost, ", "))
	}
	return assign, nil
}

func quoted(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

// inlinePolicy builds the actor's inline network with seed and
// deterministic.
func inlinePolicy(cfg Config, seed int64, deterministic bool) (*policy.ActorCritic, error) {
	pc, err := policy.ConfigForEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		return nil, err
	}
	pc.Seed, pc.Deterministic, pc.SharedTrunk = seed, deterministic, cfg.SharedTrunk
	pc = pc.WithShape(cfg.Hidden, cfg.Activation).WithConv(cfg.Conv)
	if err := pc.Validate(); err != nil {
		return nil, err
	}
	return policy.New(pc)
}

// route is the policy side of one mapping, as built: the client its
// agents ask (the policy's own, shared by its mappings, under epsilon-greedy
// exploration if the mapping explores), the producer of its stream (shared
// by the mappings of that stream) and its batch length.
type route struct {
	policy      string
	agents      []string // ids, for the log
	client      stream.InferenceClient
	pool        *poolInference // a pool mapping's: each agent plays through a slot of it
	explore     *exploring
	producer    stream.SamplePoster
	sampleSteps int
	versionCuts bool // a sample stream's batches end at a newer version
}

// policyStat is the actor's count of one policy's episodes and its recent
// returns (see Worker.Stats).
type policyStat struct {
	episodes int64
	recent   [member.ReturnWindow]float64
	next, n  int
}

func (p *policyStat) add(ret float64) {
	p.episodes++
	p.recent[p.next] = ret
	p.next = (p.next + 1) % len(p.recent)
	p.n = min(p.n+1, len(p.recent))
}

func (p *policyStat) meanReturn() float64 {
	if p.n == 0 {
		return 0
	}
	var sum float64
	for _, r := range p.recent[:p.n] {
		sum += r
	}
	return sum / float64(p.n)
}

// addPolicyEpisode is the targets' OnPolicyEpisode.
func (w *Worker) addPolicyEpisode(policy string, ret float64) {
	if p := w.policyStats[policy]; p != nil {
		p.add(ret)
	}
}

// policiesStat is the "policies" statistic: per policy, its agents' steps
// and batches sent, the episodes they took part in, and the mean of their
// recent returns.
func (w *Worker) policiesStat() map[string]any {
	steps, sent := map[string]int64{}, map[string]int64{}
	if w.ring != nil {
		for _, t := range w.ring.Targets() {
			for _, a := range t.Agents() {
				steps[a.Policy()] += a.steps
				sent[a.Policy()] += a.sent
			}
		}
	}
	out := make(map[string]any, len(w.policyStats))
	for name, p := range w.policyStats {
		st := map[string]any{
			"agent_steps":         steps[name],
			"batches_sent":        sent[name],
			member.StatEpisodes:   p.episodes,
			member.StatMeanReturn: p.meanReturn(),
		}
		out[name] = st
	}
	for _, r := range w.routes {
		if r.pool != nil {
			maps.Copy(out[r.policy].(map[string]any), r.pool.stats())
		}
	}
	return out
}

// mappings describes the routes for the log: "policy -> agent ids (stream)".
func (w *Worker) mappings(cfg Config) string {
	parts := make([]string, len(w.routes))
	for i, r := range w.routes {
		desc := cfg.routes[i].streamDesc()
		if r.versionCuts {
			desc += ", batches of one version"
		}
		parts[i] = fmt.Sprintf("%s -> %s (%s)", r.policy, strings.Join(r.agents, ", "), desc)
	}
	return strings.Join(parts, "; ")
}

// replays are the producers that send to a replay (Ape-X).
func (w *Worker) replays() []*localreplay.Poster {
	var out []*localreplay.Poster
	for _, p := range w.producers {
		if r, ok := p.(*localreplay.Poster); ok {
			out = append(out, r)
		}
	}
	return out
}
