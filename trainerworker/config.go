package trainerworker

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/distrl/distrl/algo/ppo"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker"
	"github.com/vmihailenco/msgpack/v5"
)

// Defaults of Config.
const (
	DefaultPolicy          = "default"
	DefaultEnv             = env.CartPoleName
	DefaultBatchSteps      = 1024
	DefaultMaxStaleness    = 2
	DefaultPublishEvery    = 1
	DefaultCheckpointEvery = 10
)

// Config is the configuration of a trainer, the kwargs of "configure".
// Zero values mean the defaults. Unknown keys, here and inside ppo, are
// refused, so a misspelt hyperparameter fails instead of silently keeping
// its default.
type Config struct {
	// Algorithm is "ppo" (this configuration) or "dqn" (DQNConfig).
	Algorithm string         `msgpack:"algorithm"`
	Policy    string         `msgpack:"policy"`     // policy name; default "default"
	Env       string         `msgpack:"env"`        // registered environment; default CartPole-v1
	EnvConfig map[string]any `msgpack:"env_config"` // the environment's configuration
	// Hidden and Activation shape the network as they do a policy
	// worker's; nil and "" mean policy.DefaultHidden and tanh.
	Hidden     []int         `msgpack:"hidden"`
	Activation nn.Activation `msgpack:"activation"`
	// Conv puts convolutions before the hidden layers (an image
	// observation, [H, W, C]; see policy.Config); SharedTrunk puts the
	// policy and value heads on one trunk. The policy workers must be
	// given the same, or the parameters the trainer publishes do not fit
	// their network.
	Conv        []nn.ConvLayer `msgpack:"conv"`
	SharedTrunk bool           `msgpack:"shared_trunk"`
	// Seed draws the initial parameters (version 0) and, unless ppo.seed
	// is given, PPO's minibatch shuffling.
	Seed int64 `msgpack:"seed"`
	// PPO overrides fields of ppo.DefaultConfig() by their msgpack names
	// (gamma, lambda, lr, lr_decay_updates, epochs, minibatch_size, ...).
	PPO msgpack.RawMessage `msgpack:"ppo"`
	// SampleStream is the sample stream consumed; default "default".
	SampleStream string `msgpack:"sample_stream"`
	// BatchSteps is how many agent steps one update takes at least; the
	// update uses every step buffered when the threshold is crossed.
	// Default 1024.
	BatchSteps int `msgpack:"batch_steps"`
	// MaxStaleness (K) drops batches whose policy_version is older than
	// the trainer's version minus K. nil means 2; 0 accepts only batches
	// of the current version.
	MaxStaleness *int64 `msgpack:"max_staleness"`
	// PublishEvery publishes the parameters every that many updates;
	// default 1.
	PublishEvery int `msgpack:"publish_every"`
	// CheckpointDir holds the checkpoints; "" disables them.
	CheckpointDir string `msgpack:"checkpoint_dir"`
	// CheckpointEvery writes a checkpoint every that many updates (and one
	// on close); default 10.
	CheckpointEvery int `msgpack:"checkpoint_every"`
	// Device is where the learner trains: "cpu" (the default), "cuda"
	// (cuda:0) or "cuda:N", an NVIDIA GPU through nn/cuda's engine (the
	// worker then runs as rlctl-cuda; docs/gpu.md). Categorical heads
	// only.
	Device string `msgpack:"device"`
	// Threads is how many cores one minibatch's gradient is spread over
	// (at least 64 samples each): a count, or "auto" (the default; a
	// quarter of the node's cores, 1 to 8: worker.AutoThreads).
	Threads worker.Threads `msgpack:"threads"`
	// Overlap takes samples in while an update runs: the learner computes
	// on a goroutine of its own while the loop receives, checks and
	// buffers the next update's batches and answers fetches and requests,
	// instead of each in turn. Batches taken during an update are trained
	// with the version it makes, one version staler than without: it
	// needs max_staleness >= 1, and a trainer learning alone (a group's
	// members update in step). nil: on for a learner on a GPU, whose
	// update leaves the CPU free, where it can be; off on the CPU, where
	// the update and the intake want the same cores (docs/gpu.md).
	Overlap *bool `msgpack:"overlap"`
	// MaxUpdates completes the worker after that many updates, counted
	// from version 0 (a resumed trainer counts those of its checkpoint);
	// 0 means unbounded.
	MaxUpdates int64 `msgpack:"max_updates"`
	// GroupConfig (group_size, ...) makes this trainer a member of its
	// policy's data-parallel group.
	GroupConfig `msgpack:",inline"`
	// KeepConfig (keep_every, ...) sets versions aside with a tag.
	KeepConfig `msgpack:",inline"`
}

// settings are a parsed configuration: the Config with its defaults in
// place and what follows from it.
type settings struct {
	cfg       Config
	staleness int64
	policy    policy.Config
	ppo       ppo.Config
	// hash identifies what a checkpoint must match to be restored: the
	// policy name and the network's architecture (see configHash).
	hash string
	// memberSteps is the steps this trainer buffers for an update: its
	// share of batch_steps in a group.
	memberSteps int
	// overlap: updates run on a goroutine of their own (Config.Overlap).
	overlap bool
}

// groupHash is what the members of this trainer's group must agree on.
func (s settings) groupHash() string {
	p := s.ppo
	p.Seed = 0 // each worker's own; rank 0's learner state is everyone's
	return groupHash("ppo", s.hash, p, s.cfg.BatchSteps, s.staleness, s.cfg.GroupSize, s.cfg.GroupCheckEvery)
}

// parseConfig decodes and checks the kwargs of "configure". A bad
// configuration is a bad_arguments *rpc.Error, which leaves the worker as
// it was; a failure to register the built-in environments is the
// worker's own.
func parseConfig(args rpc.Args, index int) (settings, error) {
	var s settings
	cfg := &s.cfg
	if err := worker.DecodeConfig(args, "trainer config", cfg); err != nil {
		return s, err
	}
	cfg.Policy = cmp.Or(cfg.Policy, DefaultPolicy)
	cfg.Env = cmp.Or(cfg.Env, DefaultEnv)
	cfg.SampleStream = cmp.Or(cfg.SampleStream, stream.DefaultStream)
	cfg.BatchSteps = cmp.Or(cfg.BatchSteps, DefaultBatchSteps)
	cfg.PublishEvery = cmp.Or(cfg.PublishEvery, DefaultPublishEvery)
	cfg.CheckpointEvery = cmp.Or(cfg.CheckpointEvery, DefaultCheckpointEvery)
	s.staleness = DefaultMaxStaleness
	if cfg.MaxStaleness != nil {
		s.staleness = *cfg.MaxStaleness
	}
	switch {
	case cfg.BatchSteps < 1:
		return s, badConfig("batch_steps %d, want >= 1", cfg.BatchSteps)
	case s.staleness < 0:
		return s, badConfig("max_staleness %d, want >= 0", s.staleness)
	case cfg.PublishEvery < 1:
		return s, badConfig("publish_every %d, want >= 1", cfg.PublishEvery)
	case cfg.CheckpointEvery < 1:
		return s, badConfig("checkpoint_every %d, want >= 1", cfg.CheckpointEvery)
	case cfg.MaxUpdates < 0:
		return s, badConfig("max_updates %d, want >= 0", cfg.MaxUpdates)
	}
	if err := cfg.GroupConfig.check(index); err != nil {
		return s, err
	}
	if err := cfg.KeepConfig.check(cfg.CheckpointDir); err != nil {
		return s, err
	}
	kind, _, err := worker.ParseDevice(cfg.Device)
	if err != nil {
		return s, badConfig("%v", err)
	}
	s.memberSteps = (cfg.BatchSteps + cfg.GroupSize - 1) / cfg.GroupSize
	canOverlap := s.staleness >= 1 && cfg.GroupSize <= 1
	if s.overlap, err = overlapFor(cfg.Overlap, kind, canOverlap); err != nil {
		return s, badConfig("%v (max_staleness %d, group_size %d)", err, s.staleness, cfg.GroupSize)
	}

	pc, err := policy.ConfigForEnv(cfg.Env, cfg.EnvConfig)
	if err != nil {
		return s, badConfig("%v", err)
	}
	pc = pc.WithShape(cfg.Hidden, cfg.Activation).WithConv(cfg.Conv)
	pc.Seed, pc.SharedTrunk = cfg.Seed, cfg.SharedTrunk
	if err := pc.Validate(); err != nil {
		return s, badConfig("%v", err)
	}
	s.policy = pc

	s.ppo = ppo.DefaultConfig()
	s.ppo.Seed = cfg.Seed
	// Decoding onto the defaults keeps every field the map leaves out
	// (and a nil or absent map keeps them all).
	if err := worker.DecodeConfig(rpc.RawArgs(cfg.PPO), "trainer config: ppo", &s.ppo); err != nil {
		return s, err
	}
	if err := s.ppo.Validate(); err != nil {
		return s, badConfig("%v", err)
	}
	return s, nil
}

// overlapFor is whether a trainer on a device of kind overlaps its intake
// and its updates, as configured (nil: the default), where it can.
func overlapFor(configured *bool, kind string, can bool) (bool, error) {
	if configured == nil {
		return can && kind != worker.DeviceCPU, nil
	}
	if *configured && !can {
		return false, errors.New("overlap needs max_staleness >= 1 and a trainer learning alone")
	}
	return *configured, nil
}

func badConfig(format string, args ...any) error {
	return rpc.Errorf(rpc.ErrTypeBadArguments, "trainer config: "+format, args...)
}

// configHash fingerprints what a checkpoint's parameters mean: the policy
// they belong to and the network's architecture. Hyperparameters are left
// out on purpose, so that a run can be resumed with, say, a lower learning
// rate; the environment is left out because only its dimensions matter,
// and they are in the spec. The input shape and the convolutions are
// appended only when present, so that the hashes of networks without them
// (and the checkpoints that carry those hashes) stay what they were.
func configHash(policyName string, spec nn.Spec) string {
	var b strings.Builder
	fmt.Fprintf(&b, "policy=%q obs=%d hidden=%v act=%s head=%s actions=%d shared=%v logstd=%v",
		policyName, spec.ObsDim, spec.Hidden, spec.Activation, spec.Head, spec.ActionDim,
		spec.SharedTrunk, spec.InitLogStd)
	if spec.InputShape != nil {
		fmt.Fprintf(&b, " shape=%v", spec.InputShape)
	}
	if len(spec.Conv) > 0 {
		fmt.Fprintf(&b, " conv=%v", spec.Conv)
	}
	if spec.ActionMask != nil {
		fmt.Fprintf(&b, " mask=%v", spec.ActionMask)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}
