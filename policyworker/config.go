package policyworker

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/paramstream"
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
	// ParamsPolicy is the policy whose parameters the worker serves;
	// default Policy. A worker serving past versions of "red" to the
	// opponents of a self-play trial answers as another policy
	// ("red-pool") so that actors can ask for either.
	ParamsPolicy string `msgpack:"params_policy"`
	// Version is what the worker serves of ParamsPolicy: "latest" (the
	// default: the newest published version, followed as it changes), a
	// kept version's number, or a tag (the newest kept version carrying
	// it, followed as the tag moves). Kept versions: paramstream.Versions.
	Version string `msgpack:"version"`
	// Pool, instead of Version, serves a version drawn from a pool of kept
	// versions, drawn anew every every_ms (default 5000).
	Pool *PoolConfig `msgpack:"pool"`
	// VersionTimeoutMs bounds how long configure waits for a kept version
	// that Version or Pool names (a trainer keeps its first after some
	// updates); past it configure fails, naming what it waited for.
	// Default 30000.
	VersionTimeoutMs int `msgpack:"version_timeout_ms"`
}

// servesKept reports whether the worker serves kept versions rather than
// the newest published one.
func (c Config) servesKept() bool { return c.Pool != nil || c.Version != paramstream.Latest }

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
	if err := cfg.checkKept(); err != nil {
		return cfg, policy.Config{}, err
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

// checkKept fills in and checks the keys that choose the version served.
func (c *Config) checkKept() error {
	c.ParamsPolicy = cmp.Or(c.ParamsPolicy, c.Policy)
	c.Version = cmp.Or(c.Version, paramstream.Latest)
	c.VersionTimeoutMs = cmp.Or(c.VersionTimeoutMs, DefaultVersionTimeoutMs)
	bad := func(format string, args ...any) error { return rpc.Errorf(rpc.ErrTypeBadArguments, format, args...) }
	if c.VersionTimeoutMs < 0 {
		return bad("version_timeout_ms %d: want > 0", c.VersionTimeoutMs)
	}
	if c.Pool != nil {
		c.Pool.Tag = cmp.Or(c.Pool.Tag, "pool")
		c.Pool.EveryMs = cmp.Or(c.Pool.EveryMs, DefaultPoolEveryMs)
		switch {
		case c.Version != paramstream.Latest:
			return bad("version %q and pool: give one", c.Version)
		case c.Pool.Last < 1 || c.Pool.EveryMs < 1:
			return bad("pool: last %d, every_ms %d: want both >= 1", c.Pool.Last, c.Pool.EveryMs)
		}
		if err := paramstream.CheckTag(c.Pool.Tag); err != nil {
			return bad("pool: %v", err)
		}
	} else if c.Version != paramstream.Latest {
		if n, err := strconv.ParseInt(c.Version, 10, 64); err == nil {
			if n < 0 {
				return bad("version %d: want >= 0", n)
			}
		} else if err := paramstream.CheckTag(c.Version); err != nil {
			return bad("version: want %q, a version number or a tag: %v", paramstream.Latest, err)
		}
	}
	if c.servesKept() && !c.FollowParams {
		return bad("follow_params false with version %q or a pool: kept versions are followed as they change", c.Version)
	}
	return nil
}
