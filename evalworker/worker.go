package evalworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
)

// TypeName is the worker type ("evaluator/0", ...).
const TypeName = member.TypeEval

// Defaults of Config.
const (
	DefaultPolicy       = "default"
	DefaultTag          = "pool"
	DefaultBestTag      = "best"
	DefaultEpisodes     = 20
	DefaultStepsPerPoll = 256
	// recordTimeout bounds the name-resolve writes of one evaluation.
	recordTimeout = 5 * time.Second
)

// Metadata keys an evaluation writes into its version; an evaluator with
// a label writes eval_{label}_return, ... instead, so that evaluations
// against different opponents sit side by side.
const (
	MetaReturn   = "eval_return"
	MetaStderr   = "eval_stderr"
	MetaWinRate  = "eval_win_rate"
	MetaEpisodes = "eval_episodes"
	MetaMs       = "eval_ms"
	// MetaOpponent is the opponent's version, for an evaluation against
	// another policy's (or the policy's own) kept version.
	MetaOpponent = "eval_opponent"
)

// MetaKey is the metadata key of an evaluation labelled label: key itself
// without a label, else key with the label after "eval_".
func MetaKey(key, label string) string {
	if label == "" {
		return key
	}
	return "eval_" + label + "_" + strings.TrimPrefix(key, "eval_")
}

// Config is the configure kwargs.
type Config struct {
	Env           string         `msgpack:"env"`
	EnvConfig     map[string]any `msgpack:"env_config"`
	Policy        string         `msgpack:"policy"`
	Tag           string         `msgpack:"tag"`
	Episodes      int            `msgpack:"episodes"`
	Deterministic *bool          `msgpack:"deterministic"`
	BestTag       *string        `msgpack:"best_tag"`
	Hidden        []int          `msgpack:"hidden"`
	Activation    nn.Activation  `msgpack:"activation"`
	Conv          []nn.ConvLayer `msgpack:"conv"`
	SharedTrunk   bool           `msgpack:"shared_trunk"`
	StepsPerPoll  int            `msgpack:"steps_per_poll"`
	Seed          *int64         `msgpack:"seed"`
	// Label names the evaluation in the version's metadata
	// (eval_{label}_return, ...), for evaluators of one policy against
	// different opponents; "": eval_return, ...
	Label string `msgpack:"label"`
	// Opponent, if set, plays some agents with a kept version of a policy
	// (a two-player game), and the version evaluated plays the others.
	Opponent *Opponent `msgpack:"opponent"`
}

// Opponent is the kept version an evaluation plays against: the newest
// version of Policy that Identifier names (a tag, such as "best", or a
// version number), looked up again at the start of every evaluation, on
// the agents of the environment at Agents. Its network has the shape of
// the evaluated one.
type Opponent struct {
	Policy     string `msgpack:"policy"`     // default: the evaluated policy
	Identifier string `msgpack:"identifier"` // required
	Agents     []int  `msgpack:"agents"`     // default [1]
}

func badConfig(format string, args ...any) error {
	return rpc.Errorf(rpc.ErrTypeBadArguments, "evaluator config: "+format, args...)
}

// parseConfig decodes and checks the kwargs, and returns the network's
// configuration.
func parseConfig(args rpc.Args, index int) (Config, policy.Config, error) {
	var cfg Config
	if err := worker.DecodeConfig(args, "evaluator config", &cfg); err != nil {
		return cfg, policy.Config{}, err
	}
	cfg.Policy = cmp.Or(cfg.Policy, DefaultPolicy)
	cfg.Tag = cmp.Or(cfg.Tag, DefaultTag)
	cfg.Episodes = cmp.Or(cfg.Episodes, DefaultEpisodes)
	cfg.StepsPerPoll = cmp.Or(cfg.StepsPerPoll, DefaultStepsPerPoll)
	if cfg.Deterministic == nil {
		t := true
		cfg.Deterministic = &t
	}
	if cfg.BestTag == nil {
		b := DefaultBestTag
		cfg.BestTag = &b
	}
	if cfg.Seed == nil {
		s := int64(index)
		cfg.Seed = &s
	}
	switch {
	case cfg.Env == "":
		return cfg, policy.Config{}, badConfig("env is required: the environment the versions are played in")
	case cfg.Episodes < 1 || cfg.StepsPerPoll < 1:
		return cfg, policy.Config{}, badConfig("episodes %d, steps_per_poll %d: want >= 1", cfg.Episodes, cfg.StepsPerPoll)
	}
	if err := paramstream.CheckTag(cfg.Tag); err != nil {
		return cfg, policy.Config{}, badConfig("tag: %v", err)
	}
	if cfg.Label != "" {
		if err := paramstream.CheckTag(cfg.Label); err != nil {
			return cfg, policy.Config{}, badConfig("label: %v", err)
		}
	}
	if *cfg.BestTag != "" {
		if err := paramstream.CheckTag(*cfg.BestTag); err != nil {
			return cfg, policy.Config{}, badConfig("best_tag: %v", err)
		}
	}
	if o := cfg.Opponent; o != nil {
		o.Policy = cmp.Or(o.Policy, cfg.Policy)
		if o.Agents == nil {
			o.Agents = []int{1}
		}
		if o.Identifier == "" {
			return cfg, policy.Config{}, badConfig("opponent: identifier is required: a tag (such as best) or a version number of policy %s", o.Policy)
		}
	}
	pc, err := policy.ConfigForEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		return cfg, pc, badConfig("%v", err)
	}
	if err := checkOpponentAgents(cfg); err != nil {
		return cfg, pc, err
	}
	pc = pc.WithShape(cfg.Hidden, cfg.Activation).WithConv(cfg.Conv)
	pc.Seed, pc.Deterministic, pc.SharedTrunk = *cfg.Seed, *cfg.Deterministic, cfg.SharedTrunk
	if err := pc.Validate(); err != nil {
		return cfg, pc, badConfig("%v", err)
	}
	return cfg, pc, nil
}

// checkOpponentAgents checks that the opponent's agents are agents of
// the environment and leave the evaluated version at least one.
func checkOpponentAgents(cfg Config) error {
	if cfg.Opponent == nil {
		return nil
	}
	e, err := api.NewEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		return badConfig("%v", err)
	}
	n := len(e.Agents())
	_ = e.Close()
	seen := map[int]bool{}
	for _, a := range cfg.Opponent.Agents {
		if a < 0 || a >= n || seen[a] {
			return badConfig("opponent: agents %v: want distinct indices below %d, the agents of %s", cfg.Opponent.Agents, n, cfg.Env)
		}
		seen[a] = true
	}
	if len(seen) == n {
		return badConfig("opponent: agents %v take every agent of %s: the version evaluated plays none", cfg.Opponent.Agents, cfg.Env)
	}
	return nil
}

// CheckConfig checks evaluator index's configure kwargs as Configure does
// (worker.Type.Check).
func CheckConfig(args rpc.Args, index int) error {
	_, _, err := parseConfig(args, index)
	return err
}

// Type is the evaluator worker type, for a worker.Registry.
func Type() worker.Type {
	return worker.Type{Name: TypeName, New: New, Spec: member.Spec{Check: CheckConfig}}
}

// New is the worker.Factory of the evaluator type.
func New(info worker.Info) (worker.Impl, error) {
	return &Worker{info: info, log: info.Log()}, nil
}

// Worker is the evaluator. Like every worker type, it is used only from
// its worker's loop goroutine.
type Worker struct {
	info   worker.Info
	log    *slog.Logger
	cfg    Config
	store  *paramstream.Versions
	kept   *paramstream.KeptReader
	env    api.Env
	policy *policy.ActorCritic
	// With an opponent: its policy's kept versions, its network, its
	// answers, and which agents it plays; scored is the first agent the
	// evaluated version plays, whose return counts.
	oppKept   *paramstream.KeptReader
	oppPolicy *policy.ActorCritic
	oppOut    api.Inference
	oppPlays  []bool
	scored    int

	cur  *run // the evaluation under way, nil between them
	done map[keptID]bool
	// Figures of the stats.
	evaluated          int64
	last, best         result
	pending            int
	envSteps, episodes int64
	warning            string
	// The network's input and output, and the actions, reused.
	obsBuf    api.Tensor[float32]
	rows      []int  // the agents whose observations obsBuf holds, in order
	rowsShape [2]int // the shape of obsBuf's view of rows
	out       api.Inference
	actions   []api.Action
	// seedCount numbers the episodes played, for their seeds.
	seedCount uint64
}

// keptID is one kept version of one publisher's epoch.
type keptID struct {
	version int64
	epoch   uint64
}

// result is one version's evaluation.
type result struct {
	version      int64
	mean, stderr float64
	winRate      float64 // share of episodes of a positive return
	episodes     int
	opponent     int64 // the opponent's version, with an opponent
	ok           bool
}

// run is an evaluation in progress: the version, the episodes' returns so
// far, and the episode being played.
type run struct {
	v       paramstream.Version
	opp     paramstream.Version // the opponent's version, if any
	returns []float64
	ret     float64
	obs     [][]float32
	began   time.Time
}

// Configure follows the policy's kept versions (paramstream.KeptReader) and makes the
// environment and the network.
func (w *Worker) Configure(ctx context.Context, args rpc.Args) error {
	cfg, pc, err := parseConfig(args, w.info.Index)
	if err != nil {
		return err
	}
	p, err := policy.New(pc)
	if err != nil {
		return badConfig("%v", err)
	}
	e, err := api.NewEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		return badConfig("%v", err)
	}
	kept, err := paramstream.NewKeptReader(ctx, w.info.Repo, w.info.Trial, cfg.Policy)
	if err != nil {
		_ = e.Close()
		return fmt.Errorf("evaluator: %w", err)
	}
	var oppKept *paramstream.KeptReader
	var oppPolicy *policy.ActorCritic
	oppPlays := make([]bool, len(e.Agents()))
	if o := cfg.Opponent; o != nil {
		if oppPolicy, err = policy.New(pc); err == nil {
			oppKept, err = paramstream.NewKeptReader(ctx, w.info.Repo, w.info.Trial, o.Policy)
		}
		if err != nil {
			_, _ = e.Close(), kept.Close()
			return fmt.Errorf("evaluator: opponent: %w", err)
		}
		for _, a := range o.Agents {
			oppPlays[a] = true
		}
	}
	if err := w.Close(); err != nil {
		w.log.Warn("evaluator: releasing the previous configuration", "err", err)
	}
	w.cfg, w.policy, w.env, w.kept = cfg, p, e, kept
	w.oppKept, w.oppPolicy, w.oppPlays = oppKept, oppPolicy, oppPlays
	w.scored = 0
	for w.oppPlays[w.scored] {
		w.scored++
	}
	w.store = paramstream.NewVersions(w.info.Repo, w.info.Trial)
	w.done, w.cur = map[keptID]bool{}, nil
	w.obsBuf = api.NewTensor[float32](len(e.Agents()), pc.ObsDim)
	w.actions = make([]api.Action, len(e.Agents()))
	w.log.Info("evaluator configured", "policy", cfg.Policy, "tag", cfg.Tag, "episodes", cfg.Episodes,
		"deterministic", *cfg.Deterministic, "best_tag", *cfg.BestTag, "env", cfg.Env)
	return nil
}

// next picks the oldest version with the tag and no evaluation, and notes
// the best evaluation recorded so far (a restarted evaluator's).
func (w *Worker) next() (paramstream.Version, bool) {
	var pick paramstream.Version
	found := false
	w.pending = 0
	for _, v := range w.kept.Versions() {
		if r, ok := recorded(v, w.cfg.Label); ok {
			if !w.best.ok || r.mean > w.best.mean {
				w.best = r
			}
			continue
		}
		if !v.HasTag(w.cfg.Tag) || w.done[keptID{v.Version, v.Epoch}] {
			continue
		}
		w.pending++
		if !found {
			pick, found = v, true
		}
	}
	return pick, found
}

// recorded is the evaluation labelled label in a version's metadata, if
// it has one.
func recorded(v paramstream.Version, label string) (result, bool) {
	mean, ok1 := v.Metadata[MetaKey(MetaReturn, label)].(float64)
	se, _ := v.Metadata[MetaKey(MetaStderr, label)].(float64)
	wr, _ := v.Metadata[MetaKey(MetaWinRate, label)].(float64)
	n, ok2 := v.Metadata[MetaKey(MetaEpisodes, label)].(float64)
	if !ok1 || !ok2 {
		return result{}, false
	}
	return result{version: v.Version, mean: mean, stderr: se, winRate: wr, episodes: int(n), ok: true}, true
}

// Poll plays up to steps_per_poll environment steps of the evaluation
// under way, starting the next when none is.
func (w *Worker) Poll(ctx context.Context) (worker.PollResult, error) {
	if w.env == nil {
		return worker.PollResult{}, errors.New("evaluator: polled before configure")
	}
	if w.cur == nil {
		v, ok := w.next()
		if !ok {
			return worker.PollResult{}, nil
		}
		if err := w.begin(v); err != nil {
			w.warning = fmt.Sprintf("version %d not evaluated: %v", v.Version, err)
			if !errors.Is(err, errNotYet) {
				w.done[keptID{v.Version, v.Epoch}] = true
			}
			return worker.PollResult{}, nil
		}
	}
	steps := 0
	for steps < w.cfg.StepsPerPoll && w.cur != nil {
		if err := w.step(); err != nil {
			return worker.PollResult{}, err
		}
		steps++
		if len(w.cur.returns) == w.cfg.Episodes {
			w.finish(ctx)
		}
	}
	return worker.PollResult{Samples: int64(steps)}, nil
}

// begin loads v and starts its first episode.
func (w *Worker) begin(v paramstream.Version) error {
	data, err := paramstream.Load(v)
	if err != nil {
		return err
	}
	if err := w.policy.SetParams(v.Version, data); err != nil {
		return err
	}
	w.cur = &run{v: v, began: time.Now()}
	if o := w.cfg.Opponent; o != nil {
		opp, err := paramstream.Select(w.oppKept.Versions(), o.Identifier)
		if err == nil {
			var data []float32
			if data, err = w.oppKept.Load(opp); err == nil {
				err = w.oppPolicy.SetParams(opp.Version, data)
			}
		}
		if err != nil {
			w.cur = nil
			return fmt.Errorf("%w: opponent %s %q: %w", errNotYet, o.Policy, o.Identifier, err)
		}
		w.cur.opp = opp
	}
	return w.reset()
}

// act runs p on the observations of the acting agents that the opponent
// plays (opp) or does not, and sets their actions.
func (w *Worker) act(p *policy.ActorCritic, opp bool, acting []bool, out *api.Inference) error {
	dim := w.obsBuf.Shape[1]
	w.rows = w.rows[:0]
	for i, o := range w.cur.obs {
		if w.oppPlays[i] == opp && api.IsActing(acting, i) {
			copy(w.obsBuf.Data[len(w.rows)*dim:(len(w.rows)+1)*dim], o)
			w.rows = append(w.rows, i)
		}
	}
	if len(w.rows) == 0 {
		return nil
	}
	w.rowsShape = [2]int{len(w.rows), dim}
	obs := api.Tensor[float32]{Shape: w.rowsShape[:], Data: w.obsBuf.Data[:len(w.rows)*dim]}
	if err := p.Infer(obs, out); err != nil {
		return err
	}
	for r, i := range w.rows {
		w.actions[i] = api.Action{Discrete: out.Actions.Data[r]}
		if !out.ContActions.IsZero() {
			d := out.ContActions.Shape[1]
			w.actions[i].Continuous = out.ContActions.Data[r*d : (r+1)*d]
		}
	}
	return nil
}

// errNotYet marks an evaluation that cannot start yet (its opponent's
// version is not kept yet): the version stays pending.
var errNotYet = errors.New("waiting")

// reset starts an episode, seeded apart from every other the evaluator
// played, so that versions are compared on fresh episodes.
func (w *Worker) reset() error {
	w.seedCount++
	obs, err := w.env.Reset(*w.cfg.Seed*1_000_003 + int64(w.seedCount))
	if err != nil {
		return fmt.Errorf("evaluator: reset: %w", err)
	}
	w.cur.obs, w.cur.ret = obs, 0
	return nil
}

// step acts for every agent and steps the environment once. Each network
// runs on the rows of the agents it plays that act this step (all of them,
// unless the environment takes turns: api.Turns); the others get a zero
// action, which the environment ignores. In a game of turns against an
// opponent that is one row of one network per step, where both networks
// ran on every row.
func (w *Worker) step() error {
	var acting []bool
	if t, ok := w.env.(api.Turns); ok {
		acting = t.Acting()
	}
	clear(w.actions)
	if err := w.act(w.policy, false, acting, &w.out); err != nil {
		return fmt.Errorf("evaluator: infer: %w", err)
	}
	if w.oppPolicy != nil {
		if err := w.act(w.oppPolicy, true, acting, &w.oppOut); err != nil {
			return fmt.Errorf("evaluator: opponent: infer: %w", err)
		}
	}
	s, err := w.env.Step(w.actions)
	if err != nil {
		return fmt.Errorf("evaluator: step: %w", err)
	}
	w.envSteps++
	w.cur.ret += float64(s.Rewards[w.scored])
	w.cur.obs = s.Obs
	if s.Done() {
		w.episodes++
		w.cur.returns = append(w.cur.returns, w.cur.ret)
		if len(w.cur.returns) < w.cfg.Episodes {
			return w.reset()
		}
	}
	return nil
}

// finish records the evaluation in the version's metadata and moves the
// best tag. A version collected meanwhile is dropped, not an error.
func (w *Worker) finish(ctx context.Context) {
	c := w.cur
	w.cur = nil
	id := keptID{c.v.Version, c.v.Epoch}
	w.done[id] = true
	mean, se := meanStderr(c.returns)
	wins := 0
	for _, x := range c.returns {
		if x > 0 {
			wins++
		}
	}
	r := result{version: c.v.Version, mean: mean, stderr: se, winRate: float64(wins) / float64(len(c.returns)),
		episodes: len(c.returns), opponent: c.opp.Version, ok: true}
	w.last = r
	w.evaluated++
	ctx, cancel := context.WithTimeout(ctx, recordTimeout)
	defer cancel()
	l := w.cfg.Label
	md := map[string]any{
		MetaKey(MetaStderr, l): se, MetaKey(MetaWinRate, l): r.winRate,
		MetaKey(MetaEpisodes, l): len(c.returns), MetaKey(MetaMs, l): time.Since(c.began).Milliseconds(),
	}
	if w.cfg.Opponent != nil {
		md[MetaKey(MetaOpponent, l)] = r.opponent
	}
	// The keys are records of their own, written one at a time: the return
	// goes last, so that a version with a return (what recorded, a
	// restarted evaluator and every reader look for) has the whole
	// evaluation, and one cut short is played again.
	err := w.store.SetMetadata(ctx, w.cfg.Policy, c.v.Version, md)
	if err == nil {
		err = w.store.SetMetadata(ctx, w.cfg.Policy, c.v.Version, map[string]any{MetaKey(MetaReturn, l): mean})
	}
	if errors.Is(err, paramstream.ErrNoVersion) {
		w.log.Info("evaluator: version collected while evaluated", "version", c.v.Version)
		return
	}
	if err != nil {
		w.warning = fmt.Sprintf("evaluation of version %d not recorded: %v", c.v.Version, err)
		return
	}
	w.log.Info("evaluator: version evaluated", "policy", w.cfg.Policy, "label", w.cfg.Label, "version", c.v.Version,
		"mean_return", mean, "stderr", se, "win_rate", r.winRate, "episodes", len(c.returns), "opponent", md[MetaKey(MetaOpponent, l)])
	if w.best.ok && mean <= w.best.mean {
		w.warning = ""
		return
	}
	prev := w.best
	w.best = r
	if *w.cfg.BestTag == "" {
		w.warning = ""
		return
	}
	// Tag the new best before untagging the old, so that a worker serving
	// the tag always finds a version.
	if err := w.store.Tag(ctx, w.cfg.Policy, c.v.Version, *w.cfg.BestTag); err != nil {
		w.warning = fmt.Sprintf("version %d not tagged %s: %v", c.v.Version, *w.cfg.BestTag, err)
		return
	}
	if prev.ok && prev.version != c.v.Version {
		if err := w.store.Untag(ctx, w.cfg.Policy, prev.version, *w.cfg.BestTag); err != nil {
			w.warning = fmt.Sprintf("version %d still tagged %s: %v", prev.version, *w.cfg.BestTag, err)
			return
		}
	}
	w.warning = ""
}

// meanStderr is the mean of xs and its standard error (the sample
// standard deviation over the root of the count; 0 for one value).
func meanStderr(xs []float64) (mean, stderr float64) {
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/float64(len(xs)-1)) / math.Sqrt(float64(len(xs)))
}

// Stats reports what the evaluator has done: the last version evaluated
// and the best, how many are waiting.
func (w *Worker) Stats() map[string]any {
	out := map[string]any{
		"policy": w.cfg.Policy, "label": w.cfg.Label, "best_tag": *w.cfg.BestTag, "evaluated": w.evaluated, "pending": w.pending,
		"env_steps": w.envSteps, member.StatEpisodes: w.episodes,
	}
	if w.last.ok {
		out[member.StatEvalVersion] = w.last.version
		out[member.StatEvalReturn] = w.last.mean
		out["eval_stderr"] = w.last.stderr
		out["eval_win_rate"] = w.last.winRate
		if w.cfg.Opponent != nil {
			out["eval_opponent"] = w.last.opponent
		}
	}
	if w.best.ok {
		out[member.StatBestVersion] = w.best.version
		out[member.StatBestReturn] = w.best.mean
		out["best_stderr"] = w.best.stderr
		out["best_win_rate"] = w.best.winRate
	}
	if w.cur != nil {
		out["evaluating"] = w.cur.v.Version
	}
	return out
}

// Warning says an evaluation that could not be recorded or tagged.
func (w *Worker) Warning() string { return w.warning }

// Close releases the environment and the mirror.
func (w *Worker) Close() error {
	var errs []error
	if w.env != nil {
		errs = append(errs, w.env.Close())
		w.env = nil
	}
	if w.kept != nil {
		errs = append(errs, w.kept.Close())
		w.kept = nil
	}
	if w.policy != nil {
		errs = append(errs, w.policy.Close())
		w.policy = nil
	}
	if w.oppKept != nil {
		errs = append(errs, w.oppKept.Close())
		w.oppKept = nil
	}
	if w.oppPolicy != nil {
		errs = append(errs, w.oppPolicy.Close())
		w.oppPolicy = nil
	}
	return errors.Join(errs...)
}
