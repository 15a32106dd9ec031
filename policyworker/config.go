package policyworker

import (
	"slices"
	"time"

	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/worker"
)

// Defaults of Config.
const (
	DefaultPolicy   = "default"
	DefaultMaxBatch = 512
)

// startupFetchTimeout bounds the fetch of the newest published parameters
// on configure. Without a publisher the fetch returns at once; this only
// limits how long a publisher that does not answer can hold up configure
// (the subscriber keeps trying afterwards, between batches).
const startupFetchTimeout = 2 * time.Second

// Config is the configuration of a policy worker, the kwargs of "configure".
// Give either Env (and EnvConfig), from which the dimensions and the head
// follow, or ObsDim, ActionDim and Head.
type Config struct {
	Policy    string         `msgpack:"policy"`
	Env       string         `msgpack:"env"`
	EnvConfig map[string]any `msgpack:"env_config"`
	ObsDim    int            `msgpack:"obs_dim"`
	// ObsShape is the shape of one observation, [H, W, C], for Conv;
	// with Env it follows from the environment (and may only repeat it).
	ObsShape      []int          `msgpack:"obs_shape"`
	ActionDim     int            `msgpack:"action_dim"`
	Head          nn.HeadKind    `msgpack:"head"`
	Conv          []nn.ConvLayer `msgpack:"conv"`   // nil: none (see policy.Config)
	Hidden        []int          `msgpack:"hidden"` // nil: policy.DefaultHidden
	Activation    nn.Activation  `msgpack:"activation"`
	Seed          int64          `msgpack:"seed"`
	Deterministic bool           `msgpack:"deterministic"`
	SharedTrunk   bool           `msgpack:"shared_trunk"` // see policy.Config
	MaxBatch      int            `msgpack:"max_batch"`
	// FollowParams loads every version the trainer publishes for Policy
	// (package paramstream). Default true; a worker with no publisher just
	// keeps its parameters until one appears.
	FollowParams bool `msgpack:"follow_params"`
	// Device runs the forward pass: "cpu" (or "", the default) or
	// "cuda:N" (a binary built with the cuda tag, rlctl-cuda).
	Device string `msgpack:"device"`
	// Threads is how many cores one batch is spread over on the CPU (at
	// least 64 rows each): a count, or "auto" (the default; a quarter of
	// the node's cores, 1 to 8: worker.AutoThreads).
	Threads worker.Threads `msgpack:"threads"`
	// ParamCacheDir is the node cache the policy workers of a machine
	// share published parameters through; "" is
	// paramstream.DefaultCacheDir.
	ParamCacheDir string `msgpack:"param_cache_dir"`
}

// parseConfig decodes and checks the kwargs of "configure". Every error is
// a bad_arguments *rpc.Error except a failure to register the built-in
// environments, which is the worker's own.
func parseConfig(args rpc.Args) (Config, policy.Config, error) {
	// Defaults that are not zero values are set before decoding, which
	// leaves absent keys alone.
	cfg := Config{FollowParams: true}
	if err := worker.DecodeConfig(args, "policy worker config", &cfg); err != nil {
		return cfg, policy.Config{}, err
	}
	if cfg.Policy == "" {
		cfg.Policy = DefaultPolicy
	}
	switch {
	case cfg.MaxBatch == 0:
		cfg.MaxBatch = DefaultMaxBatch
	case cfg.MaxBatch < 0:
		return cfg, policy.Config{}, rpc.Errorf(rpc.ErrTypeBadArguments, "max_batch %d: must be positive", cfg.MaxBatch)
	}
	if _, _, err := worker.ParseDevice(cfg.Device); err != nil {
		return cfg, policy.Config{}, rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
	}
	if cfg.Device == "" {
		cfg.Device = worker.DeviceCPU
	}
	pcfg := policy.Config{ObsDim: cfg.ObsDim, ActionDim: cfg.ActionDim, Head: cfg.Head}
	if cfg.Env != "" {
		fromEnv, err := policy.ConfigForEnv(cfg.Env, cfg.EnvConfig)
		if err != nil {
			return cfg, pcfg, rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
		}
		// Explicit dimensions may repeat what the environment says, but a
		// contradiction is a mistake worth reporting.
		if cfg.ObsDim != 0 && cfg.ObsDim != fromEnv.ObsDim ||
			cfg.ObsShape != nil && !slices.Equal(cfg.ObsShape, fromEnv.ObsShape) ||
			cfg.ActionDim != 0 && cfg.ActionDim != fromEnv.ActionDim ||
			cfg.Head != "" && cfg.Head != fromEnv.Head {
			return cfg, pcfg, rpc.Errorf(rpc.ErrTypeBadArguments,
				"obs_dim %d, obs_shape %v, action_dim %d, head %q contradict env %s (%d, %v, %d, %q)",
				cfg.ObsDim, cfg.ObsShape, cfg.ActionDim, cfg.Head, cfg.Env, fromEnv.ObsDim, fromEnv.ObsShape, fromEnv.ActionDim, fromEnv.Head)
		}
		pcfg = fromEnv
	} else {
		switch {
		case len(cfg.EnvConfig) > 0:
			return cfg, pcfg, rpc.Errorf(rpc.ErrTypeBadArguments, "env_config given without env")
		case cfg.ObsDim == 0 || cfg.ActionDim == 0 || cfg.Head == "":
			return cfg, pcfg, rpc.Errorf(rpc.ErrTypeBadArguments,
				"the policy's shape is unknown: give env, or obs_dim, action_dim and head")
		}
		pcfg.ObsShape = cfg.ObsShape
	}
	pcfg = pcfg.WithShape(cfg.Hidden, cfg.Activation).WithConv(cfg.Conv)
	pcfg.Seed, pcfg.Deterministic, pcfg.SharedTrunk = cfg.Seed, cfg.Deterministic, cfg.SharedTrunk
	pcfg.Threads = cfg.Threads.N()
	if err := pcfg.Validate(); err != nil {
		return cfg, pcfg, rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
	}
	return cfg, pcfg, nil
}
