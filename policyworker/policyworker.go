package policyworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/env"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/worker"
	zmq "github.com/pebbe/zmq4"
)

// TypeName is the worker type name ("policy/0", "policy/1", ...).
const TypeName = worker.TypePolicy

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

// Commands of the policy worker type.
const (
	CmdLoadParams = "load_params"
	CmdGetParams  = "get_params"
)

// Config is the configuration of a policy worker, the kwargs of "configure".
// Give either Env (and EnvConfig), from which the dimensions and the head
// follow, or ObsDim, ActionDim and Head.
type Config struct {
	Policy        string         `msgpack:"policy"`
	Env           string         `msgpack:"env"`
	EnvConfig     map[string]any `msgpack:"env_config"`
	ObsDim        int            `msgpack:"obs_dim"`
	ActionDim     int            `msgpack:"action_dim"`
	Head          nn.HeadKind    `msgpack:"head"`
	Hidden        []int          `msgpack:"hidden"` // nil: policy.DefaultHidden
	Activation    nn.Activation  `msgpack:"activation"`
	Seed          int64          `msgpack:"seed"`
	Deterministic bool           `msgpack:"deterministic"`
	MaxBatch      int            `msgpack:"max_batch"`
	// FollowParams loads every version the trainer publishes for Policy
	// (package paramstream). Default true; a worker with no publisher just
	// keeps its parameters until one appears.
	FollowParams bool `msgpack:"follow_params"`
	// ParamCacheDir is the node cache the policy workers of a machine
	// share published parameters through; "" is
	// paramstream.DefaultCacheDir.
	ParamCacheDir string `msgpack:"param_cache_dir"`
}

// LoadParamsArgs are the kwargs of "load_params".
type LoadParamsArgs struct {
	Version int64               `msgpack:"version"`
	Params  api.Tensor[float32] `msgpack:"params"` // flat, [NumParams]
}

// Params is the reply of "get_params".
type Params struct {
	Version int64               `msgpack:"version"`
	Params  api.Tensor[float32] `msgpack:"params"`
}

// LoadParamsReply is the reply of "load_params".
type LoadParamsReply struct {
	Version   int64 `msgpack:"version"`
	NumParams int   `msgpack:"num_params"`
}

// window is how many recent batches the latency percentile and the
// throughput are computed over: enough for a stable median, recent enough
// to show a change of load within seconds.
const window = 1000

// batchRecord is one served batch in the sliding window.
type batchRecord struct {
	end   time.Time
	rows  int
	infer time.Duration
}

// counters are the figures behind Stats, reset by every configure since a
// new configuration starts a new policy.
type counters struct {
	batches, rows int64
	maxBatch      int
	inferErrors   int64

	recent      [window]batchRecord // ring buffer
	next, count int                 // next slot to write; slots in use
	since       time.Time           // start of the span the ring covers
}

func (c *counters) record(begin, end time.Time, rows int, infer time.Duration) {
	c.batches++
	c.rows += int64(rows)
	c.maxBatch = max(c.maxBatch, rows)
	switch {
	case c.count == 0:
		c.since = begin
	case c.count == window:
		// The evicted batch ended where the span now starts.
		c.since = c.recent[c.next].end
	}
	c.recent[c.next] = batchRecord{end: end, rows: rows, infer: infer}
	c.next = (c.next + 1) % window
	c.count = min(c.count+1, window)
}

// Worker is the policy worker type. Like every worker.Impl, all its methods
// run on the worker's loop goroutine.
type Worker struct {
	info worker.Info
	log  *slog.Logger

	cfg    Config
	policy *policy.ActorCritic
	server *stream.InferenceServer
	params *paramstream.Subscriber // nil unless following published parameters

	// Reused across polls so that serving does not allocate per batch.
	batch stream.InferenceBatch
	out   api.Inference

	stats   counters
	warning string
	// paramWarning is why the last published version was not loaded.
	paramWarning string
}

var (
	_ worker.Impl        = (*Worker)(nil)
	_ worker.Commander   = (*Worker)(nil)
	_ worker.SocketOwner = (*Worker)(nil)
	_ worker.Reporter    = (*Worker)(nil)
)

// New is the worker.Factory of the policy type.
func New(info worker.Info) (worker.Impl, error) {
	return &Worker{info: info, log: info.Log()}, nil
}

// Configure builds the policy and binds the inference server. A worker
// configured again closes its server and starts over with a new policy
// (version 0 of the new configuration). A bad configuration is a
// bad_arguments error that leaves the worker as it was.
//
// Unless follow_params is false, it also subscribes to the policy's
// published parameters and loads the newest version, so that a policy
// worker that restarts mid-training serves the current policy from its
// first batch.
func (w *Worker) Configure(ctx context.Context, args rpc.Args) error {
	cfg, pcfg, err := parseConfig(args)
	if err != nil {
		return err
	}
	p, err := policy.New(pcfg)
	if err != nil {
		return rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
	}
	// The old server goes first: the new one registers the same endpoint
	// record, and actors must not keep sending to a policy being replaced.
	if err := w.closeStreams(); err != nil {
		w.log.Warn("close the previous streams", "err", err)
	}
	srv, err := stream.NewInferenceServer(ctx, stream.InferenceServerOptions{
		Repo: w.info.Repo, Trial: w.info.Trial, Policy: cfg.Policy,
		Index: w.info.Index, Host: w.info.Host, TTL: w.info.TTL, Logger: w.log,
		// Requests of another width are dropped as malformed by the
		// server rather than failing the policy's shape check here.
		ObsDim: pcfg.ObsDim,
	})
	if err != nil {
		w.policy = nil
		return fmt.Errorf("policy worker: inference server: %w", err)
	}
	var sub *paramstream.Subscriber
	if cfg.FollowParams {
		sub, err = paramstream.NewSubscriber(ctx, paramstream.SubscriberOptions{
			Repo: w.info.Repo, Trial: w.info.Trial, Policy: cfg.Policy,
			CacheDir: cfg.ParamCacheDir, Logger: w.log,
		})
		if err != nil {
			if cerr := srv.Close(); cerr != nil {
				w.log.Warn("close the inference server", "err", cerr)
			}
			w.policy = nil
			return fmt.Errorf("policy worker: parameter subscriber: %w", err)
		}
	}
	w.cfg, w.policy, w.server, w.params = cfg, p, srv, sub
	w.stats = counters{}
	w.warning, w.paramWarning = "", ""
	if sub != nil {
		w.loadNewest(ctx)
	}
	w.log.Info("configured", "policy", cfg.Policy, "addr", srv.Addr(),
		"obs_dim", pcfg.ObsDim, "action_dim", pcfg.ActionDim, "head", pcfg.Head,
		"params", p.NumParams(), "max_batch", cfg.MaxBatch)
	return nil
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
	pcfg := policy.Config{ObsDim: cfg.ObsDim, ActionDim: cfg.ActionDim, Head: cfg.Head}
	if cfg.Env != "" {
		if err := env.Register(); err != nil {
			return cfg, pcfg, fmt.Errorf("policy worker: register the built-in environments: %w", err)
		}
		fromEnv, err := policy.ConfigForEnv(cfg.Env, cfg.EnvConfig)
		if err != nil {
			return cfg, pcfg, rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
		}
		// Explicit dimensions may repeat what the environment says, but a
		// contradiction is a mistake worth reporting.
		if cfg.ObsDim != 0 && cfg.ObsDim != fromEnv.ObsDim ||
			cfg.ActionDim != 0 && cfg.ActionDim != fromEnv.ActionDim ||
			cfg.Head != "" && cfg.Head != fromEnv.Head {
			return cfg, pcfg, rpc.Errorf(rpc.ErrTypeBadArguments,
				"obs_dim %d, action_dim %d, head %q contradict env %s (%d, %d, %q)",
				cfg.ObsDim, cfg.ActionDim, cfg.Head, cfg.Env, fromEnv.ObsDim, fromEnv.ActionDim, fromEnv.Head)
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
	}
	pcfg = pcfg.WithShape(cfg.Hidden, cfg.Activation)
	pcfg.Seed, pcfg.Deterministic = cfg.Seed, cfg.Deterministic
	return cfg, pcfg, nil
}

// loadNewest fetches and loads the newest published parameters, if a
// publisher exists. A failure is logged, not returned: the worker serves
// with what it has, and Poll keeps following the publisher.
func (w *Worker) loadNewest(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, startupFetchTimeout)
	defer cancel()
	p, err := w.params.Fetch(ctx)
	switch {
	case errors.Is(err, paramstream.ErrNoPublisher):
		w.log.Info("no parameters published yet; following the policy's record")
	case err != nil:
		w.log.Warn("newest published parameters not fetched on configure; trying again between batches", "err", err)
	default:
		w.applyParams(p)
	}
}

// applyParams loads published parameters. A vector that does not fit the
// network (the trainer's configuration differs from this worker's) is
// reported as a warning and leaves the policy as it was: the worker keeps
// serving, and the next version may fit.
func (w *Worker) applyParams(p *paramstream.Params) {
	if err := w.loadParams(p.Version, p.Data); err != nil {
		w.paramWarning = fmt.Sprintf("published parameters version %d not loaded: %v", p.Version, err)
		w.log.Warn("published parameters not loaded", "version", p.Version, "err", err)
		return
	}
	w.paramWarning = ""
}

// Poll loads newly published parameters, if any have arrived, and then
// serves one batch: every whole request waiting, up to max_batch rows, in
// one forward pass. Parameters thus change between batches, never within
// one, and every answer's version says which parameters made it.
func (w *Worker) Poll(ctx context.Context) (worker.PollResult, error) {
	if w.server == nil {
		return worker.PollResult{}, errors.New("policy worker: polled before configure")
	}
	if w.params != nil {
		p, err := w.params.Poll(ctx)
		if err != nil {
			return worker.PollResult{}, fmt.Errorf("policy worker: follow published parameters: %w", err)
		}
		if p != nil {
			w.applyParams(p)
		}
	}
	rows, err := w.server.Poll(w.cfg.MaxBatch, &w.batch)
	if err != nil {
		return worker.PollResult{}, fmt.Errorf("policy worker: receive requests: %w", err)
	}
	if rows == 0 {
		return worker.PollResult{}, nil
	}
	begin := time.Now()
	if err := w.policy.Infer(w.batch.Obs, &w.out); err != nil {
		// Most likely a client sent a non-finite observation. That is no
		// reason to stop serving everyone else: the batch goes unanswered,
		// its requests time out on the clients, which post them again.
		w.stats.inferErrors++
		w.warning = fmt.Sprintf("a batch of %d rows was dropped: %v", rows, err)
		w.log.Warn("inference failed; batch dropped", "rows", rows, "err", err)
		return worker.PollResult{Batches: 1}, nil
	}
	inferred := time.Now()
	if err := w.server.Respond(&w.batch, &w.out); err != nil {
		return worker.PollResult{}, fmt.Errorf("policy worker: reply: %w", err)
	}
	w.stats.record(begin, time.Now(), rows, inferred.Sub(begin))
	w.warning = ""
	return worker.PollResult{Samples: int64(rows), Batches: 1}, nil
}

// Sockets lets an idle worker sleep on the inference socket and the
// parameter subscriber's sockets, so that a request, a new version's
// notification or a fetch reply wakes it.
func (w *Worker) Sockets() []*zmq.Socket {
	if w.server == nil {
		return nil
	}
	socks := []*zmq.Socket{w.server.Socket()}
	if w.params != nil {
		socks = append(socks, w.params.Sockets()...)
	}
	return socks
}

// Warning reports a dropped batch until the next batch is served, else
// published parameters that could not be obtained or loaded.
func (w *Worker) Warning() string {
	switch {
	case w.warning != "":
		return w.warning
	case w.paramWarning != "":
		return w.paramWarning
	case w.params != nil:
		return w.params.Warning()
	}
	return ""
}

// Stats reports the serving figures. infer_ms_p50 (the median time of the
// forward pass and sampling, without the network) and rows_per_s are over
// the last 1000 batches, the latter up to now so that it falls to zero
// when requests stop; the other counts are since the last configure.
// param_version is the newest published version obtained (-1: none yet;
// version is what the policy runs, which load_params may have set), and
// param_fetches_network and param_cache_hits say how it was obtained: over
// the network, or from the node cache another policy worker filled.
func (w *Worker) Stats() map[string]any {
	s := &w.stats
	out := map[string]any{
		"policy":         w.cfg.Policy,
		"batches":        s.batches,
		"rows":           s.rows,
		"max_batch_seen": s.maxBatch,
		"infer_errors":   s.inferErrors,
		"mean_batch":     0.0,
		"infer_ms_p50":   0.0,
		"rows_per_s":     0.0,
	}
	if s.batches > 0 {
		out["mean_batch"] = float64(s.rows) / float64(s.batches)
	}
	if s.count > 0 {
		lat := make([]time.Duration, 0, s.count)
		var rows int
		for _, r := range s.recent[:s.count] {
			lat = append(lat, r.infer)
			rows += r.rows
		}
		out["infer_ms_p50"] = median(lat).Seconds() * 1e3
		if span := time.Since(s.since).Seconds(); span > 0 {
			out["rows_per_s"] = float64(rows) / span
		}
	}
	if w.policy != nil {
		out[worker.StatVersion] = w.policy.Version()
		out["num_params"] = w.policy.NumParams()
	}
	if w.server != nil {
		st := w.server.Stats()
		out["messages"] = st.Messages
		out["malformed"] = st.Malformed
		out["undeliverable"] = st.Undeliverable
	}
	if w.params != nil {
		st := w.params.Stats()
		out["param_version"] = st.Version
		out["param_fetches_network"] = st.NetworkFetches
		out["param_cache_hits"] = st.CacheHits
		out["param_fetch_failures"] = st.FetchFailures
	}
	return out
}

// Close closes the inference server, which removes its endpoint record,
// and the parameter subscriber.
func (w *Worker) Close() error { return w.closeStreams() }

func (w *Worker) closeStreams() error {
	var errs []error
	if w.server != nil {
		if err := w.server.Close(); err != nil {
			errs = append(errs, fmt.Errorf("policy worker: close inference server: %w", err))
		}
		w.server = nil
	}
	if w.params != nil {
		if err := w.params.Close(); err != nil {
			errs = append(errs, fmt.Errorf("policy worker: close parameter subscriber: %w", err))
		}
		w.params = nil
	}
	return errors.Join(errs...)
}

// Commands adds load_params and get_params.
func (w *Worker) Commands() map[string]rpc.Handler {
	return map[string]rpc.Handler{
		CmdLoadParams: rpc.Typed(func(_ context.Context, a LoadParamsArgs) (LoadParamsReply, error) {
			if err := a.Params.Validate(); err != nil {
				return LoadParamsReply{}, rpc.Errorf(rpc.ErrTypeBadArguments, "params: %v", err)
			}
			if len(a.Params.Shape) != 1 {
				return LoadParamsReply{}, rpc.Errorf(rpc.ErrTypeBadArguments,
					"params has shape %v, want a flat vector", a.Params.Shape)
			}
			if err := w.loadParams(a.Version, a.Params.Data); err != nil {
				return LoadParamsReply{}, err
			}
			return LoadParamsReply{Version: a.Version, NumParams: len(a.Params.Data)}, nil
		}),
		CmdGetParams: func(context.Context, rpc.Args) (any, error) {
			if w.policy == nil {
				return nil, notConfigured(CmdGetParams)
			}
			v, p := w.policy.Params()
			return Params{Version: v, Params: api.Tensor[float32]{Shape: []int{len(p)}, Data: p}}, nil
		},
	}
}

// loadParams makes params (copied) the policy's parameters at version. It
// is the one place parameters change, whoever supplies them; like every
// method it must run on the worker's loop. A vector that does not fit the
// network is a bad_arguments error and changes nothing.
func (w *Worker) loadParams(version int64, params []float32) error {
	if w.policy == nil {
		return notConfigured(CmdLoadParams)
	}
	if err := w.policy.SetParams(version, params); err != nil {
		return rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
	}
	w.log.Info("parameters loaded", "version", version)
	return nil
}

func notConfigured(cmd string) error {
	return rpc.Errorf(worker.ErrTypeBadState, "%s: the policy worker is not configured", cmd)
}

// median returns the middle element of d (the upper one for an even
// count), reordering d.
func median(d []time.Duration) time.Duration {
	slices.Sort(d)
	return d[len(d)/2]
}
