package trainerworker

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/distrl/distrl/algo/dqn"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/collective"
	"github.com/distrl/distrl/internal/ckptfile"
	"github.com/distrl/distrl/internal/zsock"
	"github.com/distrl/distrl/localreplay"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/offload"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// DQNConfig is the configuration of a trainer with algorithm "dqn".
type DQNConfig struct {
	Algorithm  string         `msgpack:"algorithm"`
	Policy     string         `msgpack:"policy"`
	Env        string         `msgpack:"env"`
	EnvConfig  map[string]any `msgpack:"env_config"`
	Hidden     []int          `msgpack:"hidden"`
	Activation nn.Activation  `msgpack:"activation"`
	// Conv puts convolutions before the hidden layers, as for PPO.
	Conv []nn.ConvLayer `msgpack:"conv"`
	Seed int64          `msgpack:"seed"`
	// Device is where the learner trains, as for PPO: "cpu" (default),
	// "cuda" or "cuda:N".
	Device string `msgpack:"device"`
	// DQN overrides fields of dqn.DefaultConfig() (lr, huber_delta,
	// max_grad_norm, target_update_every, tau, double, dueling). A dueling
	// network has a shared trunk: its policy workers need shared_trunk.
	DQN msgpack.RawMessage `msgpack:"dqn"`
	// ReplayStream and ReplayTable name what is sampled (default
	// "default" both).
	ReplayStream string `msgpack:"replay_stream"`
	ReplayTable  string `msgpack:"replay_table"`
	// Overlap decodes the next sampled batch while an update runs, as
	// for PPO: only for a trainer learning alone (a group's members step
	// together); nil: on for a learner on a GPU, off on the CPU.
	Overlap *bool `msgpack:"overlap"`
	// BatchSize transitions per update (64); InFlight sample requests kept
	// waiting per replay shard (2), each held by the shard's rate limiter
	// up to SampleTimeoutMs (2000).
	BatchSize       int   `msgpack:"batch_size"`
	InFlight        int   `msgpack:"in_flight"`
	SampleTimeoutMs int64 `msgpack:"sample_timeout_ms"`
	// PublishEvery updates a new version goes to the policy workers (20).
	PublishEvery int `msgpack:"publish_every"`
	// EvalEvery updates the trainer plays one greedy episode of its own
	// environment; their returns are its mean_return (0: 50 updates).
	EvalEvery       int    `msgpack:"eval_every"`
	CheckpointDir   string `msgpack:"checkpoint_dir"`
	CheckpointEvery int    `msgpack:"checkpoint_every"` // updates; 500
	MaxUpdates      int64  `msgpack:"max_updates"`
	// GroupConfig (group_size, ...) makes this trainer a member of its
	// policy's data-parallel group: each member samples its share of
	// batch_size, and the members take every step together.
	GroupConfig `msgpack:",inline"`
	// KeepConfig (keep_every, ...) sets versions aside with a tag.
	KeepConfig `msgpack:",inline"`
}

const (
	dqnCheckpointPrefix = "dqn-"
	updatesPerPoll      = 4
)

// dqnCheckpoint is a DQN trainer's checkpoint.
type dqnCheckpoint struct {
	Version    int64            `msgpack:"version"`
	Learner    dqn.LearnerState `msgpack:"learner"`
	Samples    int64            `msgpack:"samples"`
	ConfigHash string           `msgpack:"config_hash"`
}

// dqnTrainer is the trainer of algorithm "dqn": it keeps sample requests
// waiting at every replay shard, makes one update per batch, sends the
// batch's |TD errors| back as priorities, publishes the parameters and
// plays greedy evaluation episodes for its mean return.
type dqnTrainer struct {
	info worker.Info
	log  *slog.Logger
	busy *busyClock
	cfg  DQNConfig
	dcfg dqn.Config
	hash string

	learner *dqn.Learner
	client  *replaystream.Client
	pub     *paramstream.Publisher // rank 0's (or a trainer alone's)
	keeper  *keeper                // nil: keeps no versions
	evalEnv api.Env
	// eval plays the evaluation episodes off the loop, with evalNet (the
	// online parameters as of its start) and evalEnv, which are its own
	// while it runs: a greedy episode of Freeway is 2500 forward passes,
	// about 40 ms on a core, every eval_every updates, which a learner on
	// a GPU makes in a fraction of that.
	eval        *offload.Job[float64]
	evalNet     *nn.ActorCritic
	evalSkipped int64        // evaluations due while one still ran
	grp         *groupMember // nil: learning alone
	// pending are sampled batches waiting for the group's barrier.
	pending []*replaystream.Reply

	version  int64
	inflight map[int64]int // sample request id -> shard
	td       []float64
	// steps are the decoded batches, their storage reused: the one an
	// update runs on (running) and one decoded meanwhile (ready, nil:
	// none).
	steps  [2]dqnStep
	ready  *dqnStep
	obsDim int // the network's, to check items against
	// job runs the updates while the loop decodes the next batch
	// (DQNConfig.Overlap); nil: in turn. running is the step it runs.
	job      *offload.Job[dqnUpdated]
	running  *dqnStep
	tr       localreplay.Transition // a sampled item, decoded; its storage reused
	dec      *zsock.Decoder
	lastStat dqn.Stats
	lastStep time.Duration // the last step's time, all-reduces included
	metrics  metrics

	trained, sampleErrors, updateErrors, prioritySent, checkpoints, ckptFailures int64
	episodes                                                                     int64
	returns                                                                      ring
	rate                                                                         rateRing
	since                                                                        time.Time
	resumed                                                                      int64
	warnings                                                                     map[string]string
	evalSeed                                                                     int64
	engines                                                                      Engines
}

// dqnStep is a sampled batch decoded for an update.
type dqnStep struct {
	batch dqn.Batch
	ids   []int64 // the items' ids at their shard, for the priorities
	shard int
}

// dqnUpdated is what an update on the job returns.
type dqnUpdated struct {
	st   dqn.Stats
	td   []float64
	took time.Duration
}

func newDQN(info worker.Info, m *telemetry.Trainer, engines Engines, busy *busyClock) *dqnTrainer {
	return &dqnTrainer{info: info, log: info.Log(), resumed: -1, metrics: metrics{m}, warnings: map[string]string{}, dec: zsock.NewDecoder(),
		engines: engines, busy: busy}
}

func (w *dqnTrainer) overlaps() bool { return w.job != nil }

func dqnBad(format string, args ...any) error {
	return rpc.Errorf(rpc.ErrTypeBadArguments, "trainer config (dqn): "+format, args...)
}

// parseDQNConfig decodes and checks the kwargs of "configure" for DQN: the
// configuration with its defaults, the learner's and the network's. It
// opens nothing; a bad configuration is a bad_arguments *rpc.Error.
func parseDQNConfig(args rpc.Args, index int) (DQNConfig, dqn.Config, policy.Config, error) {
	var cfg DQNConfig
	var dcfg dqn.Config
	var pc policy.Config
	if err := worker.DecodeConfig(args, "trainer config", &cfg); err != nil {
		return cfg, dcfg, pc, err
	}
	cfg.Policy = cmp.Or(cfg.Policy, DefaultPolicy)
	cfg.Env = cmp.Or(cfg.Env, DefaultEnv)
	cfg.ReplayStream = cmp.Or(cfg.ReplayStream, replaystream.DefaultName)
	cfg.ReplayTable = cmp.Or(cfg.ReplayTable, "default")
	cfg.BatchSize = cmp.Or(cfg.BatchSize, 64)
	cfg.InFlight = cmp.Or(cfg.InFlight, 2)
	cfg.SampleTimeoutMs = cmp.Or(cfg.SampleTimeoutMs, 2000)
	cfg.PublishEvery = cmp.Or(cfg.PublishEvery, 20)
	cfg.EvalEvery = cmp.Or(cfg.EvalEvery, 50)
	cfg.CheckpointEvery = cmp.Or(cfg.CheckpointEvery, 500)
	switch {
	case cfg.BatchSize < 1 || cfg.BatchSize > replaystream.MaxItems:
		return cfg, dcfg, pc, dqnBad("batch_size %d: want 1..%d", cfg.BatchSize, replaystream.MaxItems)
	case cfg.InFlight < 1 || cfg.SampleTimeoutMs < 1 || cfg.PublishEvery < 1 || cfg.EvalEvery < 1 || cfg.CheckpointEvery < 1 || cfg.MaxUpdates < 0:
		return cfg, dcfg, pc, dqnBad("in_flight %d, sample_timeout_ms %d, publish_every %d, eval_every %d, checkpoint_every %d: want >= 1; max_updates %d: want >= 0",
			cfg.InFlight, cfg.SampleTimeoutMs, cfg.PublishEvery, cfg.EvalEvery, cfg.CheckpointEvery, cfg.MaxUpdates)
	}
	if err := cfg.GroupConfig.check(index); err != nil {
		return cfg, dcfg, pc, err
	}
	if err := cfg.KeepConfig.check(cfg.CheckpointDir); err != nil {
		return cfg, dcfg, pc, err
	}
	kind, _, err := worker.ParseDevice(cfg.Device)
	if err != nil {
		return cfg, dcfg, pc, dqnBad("%v", err)
	}
	overlap, err := overlapFor(cfg.Overlap, kind, cfg.GroupSize <= 1)
	if err != nil {
		return cfg, dcfg, pc, dqnBad("%v (group_size %d)", err, cfg.GroupSize)
	}
	cfg.Overlap = &overlap // what Configure reads
	dcfg = dqn.DefaultConfig()
	if err := worker.DecodeConfig(rpc.RawArgs(cfg.DQN), "trainer config: dqn", &dcfg); err != nil {
		return cfg, dcfg, pc, err
	}
	if err := dcfg.Validate(); err != nil {
		return cfg, dcfg, pc, dqnBad("%v", err)
	}
	pc, err = policy.ConfigForEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		return cfg, dcfg, pc, dqnBad("%v", err)
	}
	pc = pc.WithShape(cfg.Hidden, cfg.Activation).WithConv(cfg.Conv)
	pc.Seed, pc.SharedTrunk = cfg.Seed, dcfg.Dueling
	if err := pc.Validate(); err != nil {
		return cfg, dcfg, pc, dqnBad("%v", err)
	}
	return cfg, dcfg, pc, nil
}

// Configure builds the learner (resuming from a checkpoint), the replay
// client and the publisher, and publishes the starting version.
func (w *dqnTrainer) Configure(ctx context.Context, args rpc.Args) error {
	cfg, dcfg, pc, err := parseDQNConfig(args, w.info.Index)
	if err != nil {
		return err
	}
	pol, err := policy.New(pc)
	if err != nil {
		return dqnBad("%v", err)
	}
	learner, err := dqn.NewLearner(pol.Net().Spec(), dcfg, cfg.Seed)
	if err != nil {
		return dqnBad("%v", err)
	}
	open, err := worker.Accelerator(cfg.Device, w.engines)
	if err != nil {
		return err
	}
	if open != nil {
		// A device that cannot be opened (absent, out of memory) is the
		// configuration's fault, as for a policy worker.
		if err := learner.SetEngine(open); err != nil {
			return dqnBad("device %s: %v", cfg.Device, err)
		}
	}
	evalEnv, err := api.NewEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		_ = learner.Close()
		return dqnBad("%v", err)
	}
	w.settle(ctx)
	w.close()
	if *cfg.Overlap {
		if w.job, err = offload.New[dqnUpdated](); err != nil {
			_ = learner.Close()
			_ = evalEnv.Close()
			return fmt.Errorf("trainer: %w", err)
		}
	}
	if w.eval, err = offload.New[float64](); err != nil {
		w.close()
		_ = learner.Close()
		_ = evalEnv.Close()
		return fmt.Errorf("trainer: %w", err)
	}
	w.evalNet, w.evalSkipped = learner.Online().Clone(), 0
	w.cfg, w.dcfg, w.learner, w.evalEnv, w.obsDim = cfg, dcfg, learner, evalEnv, learner.Spec().ObsDim
	w.hash = configHash(cfg.Policy, learner.Spec()) + fmt.Sprintf("-dueling=%v", dcfg.Dueling)
	w.version, w.trained, w.resumed = 0, 0, -1
	w.inflight = map[int64]int{}
	w.returns, w.rate, w.episodes, w.since = newRing(member.ReturnWindow), rateRing{}, 0, time.Time{}
	clear(w.warnings)
	leads := cfg.GroupSize <= 1 || w.info.Index == 0 // in a group, rank 0 resumes, publishes and checkpoints
	if cfg.CheckpointDir != "" && leads {
		if err := w.restore(); err != nil {
			w.close()
			return err
		}
	}
	w.metrics.Version.Set(float64(w.version))
	if leads {
		w.pub, err = paramstream.NewPublisher(ctx, paramstream.PublisherOptions{Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial,
			Policy: cfg.Policy, Host: w.info.Host, TTL: w.info.TTL, Logger: w.log})
		if err != nil {
			w.close()
			return fmt.Errorf("trainer: parameter publisher: %w", err)
		}
		w.keeper = newKeeper(w.info, cfg.KeepConfig, cfg.Policy, cfg.CheckpointDir)
		if err := w.publish(ctx); err != nil {
			w.close()
			return err
		}
	}
	w.grp, err = joinGroup(ctx, w.info, w.metrics.Trainer, cfg.Policy, cfg.GroupConfig,
		groupHash("dqn", w.hash, dcfg, cfg.BatchSize, cfg.GroupSize, cfg.GroupCheckEvery), w.answerFetches)
	if err != nil {
		w.close()
		return err
	}
	w.client, err = replaystream.NewClient(ctx, replaystream.ClientOptions{Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial,
		Name: cfg.ReplayStream, Logger: w.log})
	if err != nil {
		w.close()
		return fmt.Errorf("trainer: replay: %w", err)
	}
	w.log.Info("trainer configured", "algorithm", AlgoDQN, "policy", cfg.Policy, "env", cfg.Env,
		"params", learner.Online().NumParams(), "version", w.version, "dueling", dcfg.Dueling, "batch_size", cfg.BatchSize,
		"group_size", cfg.GroupSize, "rank", w.info.Index, "device", cmp.Or(cfg.Device, worker.DeviceCPU), "overlap", w.job != nil)
	return nil
}

func (w *dqnTrainer) restore() error {
	var c dqnCheckpoint
	f, err := ckptfile.LoadNewest(w.cfg.CheckpointDir, dqnCheckpointPrefix, w.log, func(_ ckptfile.File, p []byte) error {
		c = dqnCheckpoint{}
		if err := msgpack.NewDecoder(bytes.NewReader(p)).Decode(&c); err != nil {
			return err
		}
		if c.ConfigHash != w.hash {
			return fmt.Errorf("%w: written for %s, configured %s", ErrCheckpointMismatch, c.ConfigHash, w.hash)
		}
		return w.learner.Restore(c.Learner)
	})
	if errors.Is(err, ckptfile.ErrNone) {
		if errors.Is(err, ErrCheckpointMismatch) {
			return dqnBad("%v", err)
		}
		return nil // a fresh start
	}
	if err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	w.version, w.trained, w.resumed = c.Version, c.Samples, c.Version
	w.log.Info("trainer: resumed from checkpoint", "path", f.Path, "version", c.Version)
	return nil
}

func (w *dqnTrainer) checkpoint() {
	state, err := w.learner.State()
	var payload []byte
	if err == nil {
		payload, err = msgpack.Marshal(&dqnCheckpoint{Version: w.version, Learner: state, Samples: w.trained, ConfigHash: w.hash})
	}
	if err == nil {
		_, err = ckptfile.Write(w.cfg.CheckpointDir, dqnCheckpointPrefix, w.version, payload)
	}
	if err == nil {
		err = ckptfile.Prune(w.cfg.CheckpointDir, dqnCheckpointPrefix, KeepCheckpoints)
	}
	if err != nil {
		w.ckptFailures++
		w.warnings["checkpoint"] = fmt.Sprintf("checkpoint of version %d failed: %v", w.version, err)
		return
	}
	delete(w.warnings, "checkpoint")
	w.checkpoints++
	w.metrics.Checkpoints.Inc()
}

func (w *dqnTrainer) publish(ctx context.Context) error {
	if err := w.learner.Sync(); err != nil {
		return fmt.Errorf("trainer: publish: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	err := w.pub.Publish(pctx, w.version, w.learner.Online().Params())
	switch {
	case err == nil:
		delete(w.warnings, "publish")
		w.keeper.afterPublish(ctx, w.version, w.pub.Epoch(), w.learner.Online().Params(), w.warnings)
	case errors.Is(err, paramstream.ErrStaleVersion) || errors.Is(err, paramstream.ErrClosed):
		return fmt.Errorf("trainer: publish: %w", err)
	default:
		w.warnings["publish"] = fmt.Sprintf("version %d published, but its record was not written: %v", w.version, err)
	}
	return nil
}

// Poll answers parameter fetches, trains on the samples that arrived and
// keeps requests waiting at every shard.
func (w *dqnTrainer) Poll(ctx context.Context) (worker.PollResult, error) {
	if w.learner == nil {
		return worker.PollResult{}, errNotConfigured
	}
	if w.since.IsZero() {
		w.since = time.Now()
	}
	var res worker.PollResult
	if err := w.answerFetches(); err != nil {
		return res, err
	}
	w.collectEval()
	reps, err := w.client.Poll()
	if err != nil {
		return res, fmt.Errorf("trainer: replay: %w", err)
	}
	// A member of a group learns once the group has formed and its state
	// is rank 0's; samples that come before are dropped.
	ready, err := w.grp.ready(ctx, w.sync)
	if err != nil {
		return res, err
	}
	for _, r := range reps {
		switch r.Op {
		case replaystream.OpSample:
			delete(w.inflight, r.RID)
			if r.Error != nil {
				w.sampleErrors++
				if r.Error.Type != replaystream.ErrTypeRateLimited {
					w.warnings["replay"] = r.Error.Error()
				}
				continue
			}
			delete(w.warnings, "replay")
			res.Batches++
			res.Samples += int64(len(r.Items))
			if ready {
				w.pending = append(w.pending, r)
			}
		case replaystream.OpUpdate:
			if r.Error != nil {
				w.updateErrors++
			}
		}
	}
	if w.job != nil {
		if err := w.overlapSteps(ctx); err != nil {
			return res, err
		}
	} else if err := w.stepsInTurn(ctx, ready); err != nil {
		return res, err
	}
	if ready {
		w.request()
	}
	res.Done = w.reachedMax()
	return res, nil
}

// reachedMax reports whether the trainer has made max_updates versions.
func (w *dqnTrainer) reachedMax() bool { return w.cfg.MaxUpdates > 0 && w.version >= w.cfg.MaxUpdates }

func (w *dqnTrainer) answerFetches() error { return answerFetches(w.pub) }

// stepsInTurn makes one step per sampled batch, decoding and updating in
// turn; a group's members take each together, after a barrier that never
// blocks.
func (w *dqnTrainer) stepsInTurn(ctx context.Context, ready bool) error {
	for range updatesPerPoll {
		if !ready || len(w.pending) == 0 {
			return nil
		}
		if ok, err := w.grp.arrive(); err != nil || !ok {
			return err
		}
		s := w.decode(w.popPending())
		if s.batch.Len() == 0 && w.grp == nil {
			continue // a group's member takes part with nothing to add
		}
		runHook()
		begin := time.Now()
		st, td, err := w.learner.UpdateGroup(ctx, &s.batch, w.td, w.grp.reducer())
		if err := w.finishStep(ctx, s, dqnUpdated{st: st, td: td, took: time.Since(begin)}, err); err != nil {
			return err
		}
	}
	return nil
}

// overlapSteps finishes the update on the job if it is done, starts the
// next on a decoded batch, and decodes the one after while it runs.
func (w *dqnTrainer) overlapSteps(ctx context.Context) error {
	for range updatesPerPoll {
		if w.running != nil {
			r, ok := w.job.Done()
			if !ok {
				break
			}
			s := w.running
			w.running = nil
			if err := w.finishStep(ctx, s, r.Value, r.Err); err != nil {
				return err
			}
		}
		w.decodeReady()
		if w.ready == nil || w.reachedMax() {
			return nil
		}
		s, learner, td := w.ready, w.learner, w.td
		w.ready = nil
		if err := w.job.Start(func() (dqnUpdated, error) {
			runHook()
			begin := time.Now()
			st, td, err := learner.Update(&s.batch, td)
			return dqnUpdated{st: st, td: td, took: time.Since(begin)}, err
		}); err != nil {
			return fmt.Errorf("trainer: %w", err)
		}
		w.running = s
	}
	w.decodeReady() // the update runs: decode the next batch meanwhile
	return nil
}

// decodeReady decodes sampled batches until one holds a transition, for
// the next update, unless one is ready already.
func (w *dqnTrainer) decodeReady() {
	for w.ready == nil && len(w.pending) > 0 {
		if s := w.decode(w.popPending()); s.batch.Len() > 0 {
			w.ready = s
		}
	}
}

// settle waits for an update running on the job and finishes it, before
// the learner is checkpointed, replaced or closed.
func (w *dqnTrainer) settle(ctx context.Context) {
	if w.running == nil {
		return
	}
	r, _ := w.job.Wait()
	s := w.running
	w.running = nil
	if err := w.finishStep(ctx, s, r.Value, r.Err); err != nil {
		w.log.Warn("trainer: finishing the last update", "err", err)
	}
}

// popPending takes the oldest sampled batch.
func (w *dqnTrainer) popPending() *replaystream.Reply {
	r := w.pending[0]
	w.pending[0] = nil
	w.pending = w.pending[1:]
	return r
}

// memberBatch is how many transitions this trainer samples for a step:
// its share of batch_size in a group.
func (w *dqnTrainer) memberBatch() int {
	return (w.cfg.BatchSize + w.cfg.GroupSize - 1) / w.cfg.GroupSize
}

// sync makes this member's state rank 0's at every formation of the group
// (see the PPO trainer's); sampled batches not trained on are dropped.
func (w *dqnTrainer) sync(ctx context.Context) error {
	err := w.grp.syncFrom(ctx, w.log, &w.version, func() ([]byte, error) {
		state, err := w.learner.State()
		if err != nil {
			return nil, err
		}
		return msgpack.Marshal(&dqnCheckpoint{Version: w.version, Learner: state, ConfigHash: w.hash})
	}, func(b []byte) error {
		var c dqnCheckpoint
		if err := msgpack.Unmarshal(b, &c); err != nil {
			return err
		}
		if err := w.learner.Restore(c.Learner); err != nil {
			return err
		}
		w.version = c.Version
		w.metrics.Version.Set(float64(w.version))
		return nil
	})
	if err != nil {
		return err
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	return nil
}

// request keeps InFlight sample requests waiting at each shard.
func (w *dqnTrainer) request() {
	per := map[int]int{}
	for _, s := range w.inflight {
		per[s]++
	}
	// Sampled and not decoded yet; one decoded while an update runs no
	// longer holds a place, so the replay keeps InFlight requests while
	// the trainer has a batch in hand.
	for _, r := range w.pending {
		per[r.Shard]++
	}
	for _, shard := range w.client.Shards() {
		for per[shard] < w.cfg.InFlight {
			rid, err := w.client.Send(shard, &replaystream.Request{Op: replaystream.OpSample, Table: w.cfg.ReplayTable,
				N: w.memberBatch(), TimeoutMs: w.cfg.SampleTimeoutMs})
			if err != nil {
				break
			}
			w.inflight[rid] = shard
			per[shard]++
		}
	}
}

// decode decodes a sampled batch into the step that is neither running
// nor ready (there is one whenever ready is nil); items that are
// not transitions of the network's observations are left out (and
// warned of).
func (w *dqnTrainer) decode(r *replaystream.Reply) *dqnStep {
	s := &w.steps[0]
	if s == w.running || s == w.ready {
		s = &w.steps[1]
	}
	b := &s.batch
	b.Obs, b.NextObs, b.Actions, b.Rewards, b.Discounts, b.Weights = b.Obs[:0], b.NextObs[:0], b.Actions[:0], b.Rewards[:0], b.Discounts[:0], b.Weights[:0]
	s.ids, s.shard = s.ids[:0], r.Shard
	d := w.obsDim
	tr := &w.tr
	// The observations are decoded straight into the batch: each item's
	// frames get the batch's free capacity as their storage, so one of the
	// network's width lands in place (decoding reuses what capacity there
	// is) and is not copied again.
	b.Obs, b.NextObs = slices.Grow(b.Obs, len(r.Items)*d), slices.Grow(b.NextObs, len(r.Items)*d)
	for i, data := range r.Items {
		tr.Obs.Data, tr.NextObs.Data = b.Obs[len(b.Obs):len(b.Obs)], b.NextObs[len(b.NextObs):len(b.NextObs)]
		if err := localreplay.DecodeTransition(w.dec, data, tr); err != nil || tr.Obs.Len() != d || tr.NextObs.Len() != d {
			w.warnings["batch"] = fmt.Sprintf("an item of shard %d is not a transition of %d-float observations: %v", r.Shard, d, err)
			continue
		}
		b.Obs, b.NextObs = appendInPlace(b.Obs, tr.Obs.Data), appendInPlace(b.NextObs, tr.NextObs.Data)
		b.Actions, b.Rewards, b.Discounts = append(b.Actions, tr.Action), append(b.Rewards, tr.Reward), append(b.Discounts, tr.Discount)
		b.Weights = append(b.Weights, float32(r.Weights.Data[i]))
		s.ids = append(s.ids, r.IDs.Data[i])
	}
	return s
}

// appendInPlace is append(dst, src...) where src may already be the
// storage right after dst's end (decoded there): then it only extends
// dst.
func appendInPlace(dst, src []float32) []float32 {
	if n := len(dst); len(src) > 0 && cap(dst)-n >= len(src) && &dst[:n+1][n] == &src[0] {
		return dst[:n+len(src)]
	}
	return append(dst, src...)
}

// finishStep accounts for the update of s, whose learner returned u and
// err, and sends the batch's priorities back.
func (w *dqnTrainer) finishStep(ctx context.Context, s *dqnStep, u dqnUpdated, err error) error {
	w.busy.finished(u.took, !w.overlaps())
	st, td, ids := u.st, u.td, s.ids
	w.td = td
	if errors.Is(err, collective.ErrBroken) {
		w.log.Warn("trainer: group broke during a step; forming again", "version", w.version, "err", err)
		return nil
	}
	if err != nil {
		// A non-finite loss (here or, in a group, on a member): the step
		// was not taken; the samples are skipped.
		w.warnings["update"] = err.Error()
		return nil
	}
	delete(w.warnings, "update")
	w.grp.updated()
	w.lastStep = u.took
	w.lastStat = st
	w.version++
	w.trained += int64(len(ids))
	w.rate.add(time.Now(), w.trained)
	w.metrics.updated(w.version, int64(len(ids)))
	w.metrics.dqnLosses(st)
	if len(ids) > 0 {
		prios := make([]float64, len(td))
		for i, x := range td {
			prios[i] = x + 1e-6
		}
		if _, err := w.client.Send(s.shard, &replaystream.Request{Op: replaystream.OpUpdate, Table: w.cfg.ReplayTable,
			IDs: api.Tensor[int64]{Shape: []int{len(ids)}, Data: ids}, Priorities: api.Tensor[float64]{Shape: []int{len(prios)}, Data: prios}}); err == nil {
			w.prioritySent += int64(len(ids))
		}
	}
	done := w.cfg.MaxUpdates > 0 && w.version >= w.cfg.MaxUpdates
	if w.grp != nil {
		// The group compares parameters now and then: the host's copy must
		// be the engine's (learning alone, only publishing, evaluating and
		// checkpointing need it).
		if err := w.learner.Sync(); err != nil {
			return err
		}
	}
	if err := w.grp.checkParams(ctx, w.log, w.version, done, w.learner.Online().Params()); err != nil {
		return err
	}
	if !w.grp.leads() {
		return nil // rank 0 evaluates, checkpoints and publishes for the group
	}
	if w.version%int64(w.cfg.EvalEvery) == 0 {
		w.evaluate()
	}
	if w.cfg.CheckpointDir != "" && (w.version%int64(w.cfg.CheckpointEvery) == 0 || done) {
		w.checkpoint()
	}
	if w.version%int64(w.cfg.PublishEvery) == 0 || done {
		return w.publish(ctx)
	}
	return nil
}

// evaluate plays one greedy episode (the trainer's own environment and
// the online network) and records its return.
//
// The episode runs on the eval job with a copy of the online parameters
// taken now; its return is recorded when it ends (collectEval). An
// evaluation due while the last one still runs is skipped and counted.
func (w *dqnTrainer) evaluate() {
	if w.eval.Running() {
		w.evalSkipped++
		return
	}
	if err := w.learner.Sync(); err != nil {
		w.warnings["eval"] = err.Error()
		return
	}
	if err := w.evalNet.SetParams(w.learner.Online().Params()); err != nil {
		w.warnings["eval"] = err.Error()
		return
	}
	w.evalSeed++
	net, env, dueling, seed := w.evalNet, w.evalEnv, w.dcfg.Dueling, 1_000_000+w.evalSeed
	if err := w.eval.Start(func() (float64, error) { return greedyEpisode(net, env, dueling, seed) }); err != nil {
		w.warnings["eval"] = err.Error()
	}
}

// collectEval records the return of an evaluation episode that has ended.
func (w *dqnTrainer) collectEval() {
	r, ok := w.eval.Done()
	if !ok {
		return
	}
	if r.Err != nil {
		w.warnings["eval"] = r.Err.Error()
		return
	}
	delete(w.warnings, "eval")
	w.episodes++
	w.returns.add(r.Value)
	w.metrics.ended(1, &w.returns)
}

// greedyEpisode plays one episode of env from seed with net's greedy
// actions and returns its return.
func greedyEpisode(net *nn.ActorCritic, env api.Env, dueling bool, seed int64) (float64, error) {
	obs, err := env.Reset(seed)
	if err != nil || len(obs) != 1 {
		return 0, fmt.Errorf("evaluation environment: reset: %v (%d agents)", err, len(obs))
	}
	ws, out := nn.NewWorkspace(), &nn.Output{}
	var q []float32
	ret := 0.0
	for {
		if q, err = dqn.QValues(net, dueling, obs[0], 1, ws, out, q); err != nil {
			return 0, err
		}
		st, err := env.Step([]api.Action{{Discrete: int32(dqn.Argmax(q))}})
		if err != nil {
			return 0, err
		}
		ret += float64(st.Rewards[0])
		if st.Done() {
			return ret, nil
		}
		obs = st.Obs
	}
}

// Sockets: parameter fetches and replay replies wake an idle trainer. The
// replay shards' sockets come and go with the shards (SocketsVersion).
func (w *dqnTrainer) Sockets() []*zmq.Socket {
	var out []*zmq.Socket
	if w.pub != nil {
		out = append(out, w.pub.Socket())
	}
	if w.client != nil {
		out = append(out, w.client.Sockets()...)
	}
	return append(out, w.grp.sockets()...)
}

// SocketsVersion changes when the replay client's sockets change (the
// loop watches the sockets of the shards there are now) or the group's
// joins or leaves Sockets; both counts only grow, so their sum changes
// with either.
func (w *dqnTrainer) SocketsVersion() uint64 {
	v := w.grp.socketsVersion()
	if w.client != nil {
		v += w.client.SocketsVersion()
	}
	return v
}

// IdleFor: with no replay shard yet, look for one every 50 ms (its record
// comes through a watch, not a socket); replies wake the trainer. It does
// not ask the client for its shards, which would open and close sockets
// outside Poll.
func (w *dqnTrainer) IdleFor() time.Duration {
	if w.client == nil || w.client.Connections() == 0 {
		return 50 * time.Millisecond
	}
	return time.Hour
}

// WaitFds and PrepareWait: a group's member at the barrier also wakes for
// its shared-memory doorbell, an overlapping trainer when its update is
// done.
func (w *dqnTrainer) WaitFds() []int    { return withJobFd(withJobFd(w.grp.waitFds(), w.job), w.eval) }
func (w *dqnTrainer) PrepareWait() bool { return w.grp.prepareWait() }

// Note says where the trainer stands in its group, if it has one.
func (w *dqnTrainer) Note() string { return w.grp.note(w.lastStep) }

// Warning joins the current warnings.
func (w *dqnTrainer) Warning() string {
	var parts []string
	if g := w.grp.warning(); g != "" {
		parts = append(parts, g)
	}
	for _, k := range slices.Sorted(maps.Keys(w.warnings)) {
		parts = append(parts, w.warnings[k])
	}
	return strings.Join(parts, "; ")
}

// Stats of the DQN trainer.
func (w *dqnTrainer) Stats() map[string]any {
	out := map[string]any{
		member.StatVersion: w.version, "updates": w.version, "samples_trained": w.trained,
		"train_samples_per_s": w.rate.perSecond(time.Now()), "loss": w.lastStat.Loss, "mean_q": w.lastStat.MeanQ,
		"mean_td": w.lastStat.MeanTD, "grad_norm": w.lastStat.GradNorm, member.StatEpisodes: w.episodes,
		"sample_errors": w.sampleErrors, "update_errors": w.updateErrors, "priorities_sent": w.prioritySent,
		"checkpoints": w.checkpoints, "checkpoint_failures": w.ckptFailures, "resumed_from": w.resumed,
		"device": cmp.Or(w.cfg.Device, worker.DeviceCPU), "overlap": w.job != nil,
		"updating": w.running != nil, "evals_skipped": w.evalSkipped,
	}
	if w.client != nil {
		out["replay_shards"] = len(w.client.Shards())
	}
	w.keeper.stats(out)
	if w.returns.count > 0 {
		out[member.StatMeanReturn] = w.returns.mean()
	}
	w.grp.stats(out)
	if math.IsNaN(w.lastStat.Loss) {
		out["loss"] = nil
	}
	return out
}

func (w *dqnTrainer) close() error {
	var errs []error
	if w.learner != nil {
		errs = append(errs, w.learner.Close()) // its engines; it trains on the CPU until replaced
	}
	if w.client != nil {
		errs = append(errs, w.client.Close())
		w.client = nil
	}
	if w.pub != nil {
		errs = append(errs, w.pub.Close())
		w.pub = nil
	}
	if w.grp != nil {
		errs = append(errs, w.grp.close())
		w.grp = nil
	}
	clear(w.pending)
	w.pending = w.pending[:0]
	w.ready = nil
	if w.job != nil {
		errs = append(errs, w.job.Close())
		w.job = nil
	}
	if w.eval != nil { // before evalEnv: Close waits for an episode playing in it
		errs = append(errs, w.eval.Close())
		w.eval = nil
	}
	if w.evalEnv != nil {
		errs = append(errs, w.evalEnv.Close())
		w.evalEnv = nil
	}
	return errors.Join(errs...)
}

// Close checkpoints what it has and closes the streams.
func (w *dqnTrainer) Close() error {
	w.settle(context.Background())
	if w.learner != nil && w.cfg.CheckpointDir != "" && w.grp.leads() {
		w.checkpoint()
	}
	return w.close()
}
