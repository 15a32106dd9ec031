package policyworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/internal/monoclock"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
)

// TypeName is the worker type name ("policy/0", "policy/1", ...).
const TypeName = member.TypePolicy

// Worker is the policy worker type. Like every worker.Impl, all its methods
// run on the worker's loop goroutine.
type Worker struct {
	info    worker.Info
	log     *slog.Logger
	devices Devices

	cfg    Config
	policy *policy.ActorCritic
	server *stream.InferenceServer
	params *paramstream.Subscriber // nil unless following published parameters
	kept   *kept                   // nil unless serving kept versions

	// Reused across polls so that serving does not allocate per batch.
	batch stream.InferenceBatch
	out   api.Inference

	// When Poll last looked for new parameters, and last served a
	// batch: see paramPollEvery.
	paramsPolled, served time.Time

	stats counters
	// metrics records the served batches in Prometheus, where stats
	// counts them; queue bounds when their requests arrived.
	metrics *telemetry.Policy
	queue   queueClock
	warning string
	// paramWarning is why the last published version was not loaded.
	paramWarning string
}

var (
	_ worker.Impl        = (*Worker)(nil)
	_ worker.Commander   = (*Worker)(nil)
	_ worker.SocketOwner = (*Worker)(nil)
	_ worker.FdWaiter    = (*Worker)(nil)
	_ worker.Reporter    = (*Worker)(nil)
)

// New is the worker.Factory of the policy type with the CPU alone: a
// configuration that names another device is refused.
func New(info worker.Info) (worker.Impl, error) { return NewFactory(nil)(info) }

// Devices are the accelerators a binary can run policies on, by kind (the
// "cuda" of "cuda:0"): each opens a backend on the device of an ordinal.
// rlctl-cuda passes {"cuda": cuda.Opener}; rlctl passes none.
type Devices map[string]func(ordinal int) policy.OpenBackend

// NewType is the policy worker type, for a worker.Registry, with the
// accelerators of devices (nil: the CPU alone).
func NewType(devices Devices) worker.Type {
	return worker.Type{Name: TypeName, New: NewFactory(devices), Spec: member.Spec{Check: CheckConfig}}
}

// CheckConfig checks a policy worker's configure kwargs as Configure
// does, opening nothing (worker.Type.Check). Whether this binary can run
// a CUDA device is left to the worker (the controller starts such workers
// with rlctl-cuda).
func CheckConfig(args rpc.Args, _ int) error {
	_, _, err := parseConfig(args)
	return err
}

// NewFactory is the worker.Factory of the policy type with devices besides
// the CPU.
func NewFactory(devices Devices) worker.Factory {
	return func(info worker.Info) (worker.Impl, error) {
		return &Worker{info: info, log: info.Log(), devices: devices, metrics: info.Telemetry().Policy()}, nil
	}
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
	open, err := w.backend(cfg.Device)
	if err != nil {
		return err
	}
	p, err := policy.NewOn(pcfg, open)
	if err != nil {
		// A device that cannot be opened (absent, out of memory) is
		// refused like any configuration this worker cannot run, leaving
		// the worker as it was.
		if open != nil {
			return rpc.Errorf(rpc.ErrTypeBadArguments, "device %s: %v", cfg.Device, err)
		}
		return rpc.Errorf(rpc.ErrTypeBadArguments, "%v", err)
	}
	// The old server goes first: the new one registers the same endpoint
	// record, and actors must not keep sending to a policy being replaced.
	if err := w.closeStreams(); err != nil {
		w.log.Warn("close the previous streams", "err", err)
	}
	srv, err := stream.NewInferenceServer(ctx, stream.InferenceServerOptions{
		Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial, Policy: cfg.Policy,
		Index: w.info.Index, Host: w.info.Host, TTL: w.info.TTL, Logger: w.log,
		// Requests of another width are dropped as malformed by the
		// server rather than failing the policy's shape check here.
		ObsDim: pcfg.ObsDim,
	})
	if err != nil {
		w.closePolicy(p)
		return fmt.Errorf("policy worker: inference server: %w", err)
	}
	abandon := func() {
		if cerr := srv.Close(); cerr != nil {
			w.log.Warn("close the inference server", "err", cerr)
		}
		w.closePolicy(p)
	}
	var sub *paramstream.Subscriber
	var kv *kept
	switch {
	case cfg.servesKept():
		if kv, err = w.newKept(ctx, cfg); err != nil {
			abandon()
			return err
		}
		v, data, err := kv.first(ctx, time.Duration(cfg.VersionTimeoutMs)*time.Millisecond)
		if err == nil {
			err = p.SetParams(v.Version, data)
		}
		if err != nil {
			_ = kv.close()
			abandon()
			return err
		}
	case cfg.FollowParams:
		sub, err = paramstream.NewSubscriber(ctx, paramstream.SubscriberOptions{
			Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial, Policy: cfg.ParamsPolicy,
			CacheDir: cfg.ParamCacheDir, Logger: w.log,
		})
		if err != nil {
			abandon()
			return fmt.Errorf("policy worker: parameter subscriber: %w", err)
		}
	}
	w.cfg, w.policy, w.server, w.params, w.kept = cfg, p, srv, sub, kv
	w.stats, w.queue = counters{}, queueClock{}
	w.metrics.Version.Set(float64(p.Version()))
	w.warning, w.paramWarning = "", ""
	if sub != nil {
		w.loadNewest(ctx)
	}
	serving := "the newest version of " + cfg.ParamsPolicy
	if kv != nil {
		serving = fmt.Sprintf("%s of %s (version %d)", kv.describe(), cfg.ParamsPolicy, p.Version())
	}
	w.log.Info("configured", "policy", cfg.Policy, "serving", serving, "addr", srv.Addr(),
		"obs_dim", pcfg.ObsDim, "action_dim", pcfg.ActionDim, "head", pcfg.Head,
		"params", p.NumParams(), "max_batch", cfg.MaxBatch, "device", cfg.Device, "threads", pcfg.Threads)
	return nil
}

// paramPollEvery is how often a policy worker that is serving batches
// looks for new parameters. Looking costs two receive calls on the
// subscriber's sockets, 14% of the policy worker's CPU time when it
// answered requests of 4 rows; parameters change every few hundred
// milliseconds at most. A worker that has served nothing for that long (it
// is idle, or was woken by the subscriber's sockets) looks every poll, so
// a notification to an idle worker never waits; one that arrives while
// batches are served waits at most this long.
const paramPollEvery = time.Millisecond

// Poll loads newly published parameters, if any have arrived, and then
// serves one batch: every whole request waiting, up to max_batch rows, in
// one forward pass. Parameters thus change between batches, never within
// one, and every answer's version says which parameters made it.
func (w *Worker) Poll(ctx context.Context) (worker.PollResult, error) {
	if w.server == nil {
		return worker.PollResult{}, errors.New("policy worker: polled before configure")
	}
	now := monoclock.Now()
	if w.params != nil && (now.Sub(w.paramsPolled) >= paramPollEvery || now.Sub(w.served) >= paramPollEvery) {
		w.paramsPolled = now
		p, err := w.params.Poll(ctx)
		if err != nil {
			return worker.PollResult{}, fmt.Errorf("policy worker: follow published parameters: %w", err)
		}
		if p != nil {
			w.applyParams(p)
		}
	}
	if w.kept != nil {
		v, data, err := w.kept.poll(now)
		switch {
		case err != nil:
			w.paramWarning = fmt.Sprintf("kept version %d of %s not loaded: %v", v.Version, w.cfg.ParamsPolicy, err)
		case data != nil:
			w.applyParams(&paramstream.Params{Version: v.Version, Data: data})
		}
	}
	rows, err := w.server.Poll(w.cfg.MaxBatch, &w.batch)
	if err != nil {
		return worker.PollResult{}, fmt.Errorf("policy worker: receive requests: %w", err)
	}
	if rows == 0 {
		w.queue.empty()
		return worker.PollResult{}, nil
	}
	w.served = now
	begin := monoclock.Now()
	queued := w.queue.took(now, begin, rows, w.cfg.MaxBatch)
	if err := w.policy.Infer(w.batch.Obs, &w.out); err != nil {
		// Most likely a client sent a non-finite observation. That is no
		// reason to stop serving everyone else: the batch goes unanswered,
		// its requests time out on the clients, which post them again.
		w.stats.inferErrors++
		w.warning = fmt.Sprintf("a batch of %d rows was dropped: %v", rows, err)
		w.log.Warn("inference failed; batch dropped", "rows", rows, "err", err)
		return worker.PollResult{Batches: 1}, nil
	}
	inferred := monoclock.Now()
	if err := w.server.Respond(&w.batch, &w.out); err != nil {
		return worker.PollResult{}, fmt.Errorf("policy worker: reply: %w", err)
	}
	w.stats.record(begin, monoclock.Now(), rows, inferred.Sub(begin))
	w.observe(rows, w.batch.Requests(), begin.Sub(queued), inferred.Sub(begin))
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

// WaitFds is the inference server's shared-memory doorbell, so an idle
// policy worker also wakes when an actor on this node sends requests
// (worker.FdWaiter).
func (w *Worker) WaitFds() []int {
	if w.server == nil {
		return nil
	}
	return w.server.WaitFds()
}

// PrepareWait tells same-node actors the policy worker is about to sleep;
// false when requests are already waiting.
func (w *Worker) PrepareWait() bool {
	if w.server == nil {
		return true
	}
	return w.server.PrepareWait()
}

// InputReady reports whether an actor's request waits in shared memory, so
// that the loop finds it without sleeping (worker.MemoryWaiter).
func (w *Worker) InputReady() (ready, peers bool) {
	if w.server == nil {
		return false, false
	}
	return w.server.InputReady()
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

// Close closes the inference server, which removes its endpoint record,
// and the parameter subscriber.
func (w *Worker) Close() error { return w.closeStreams() }

// backend returns how to open the policy's backend on device: nil for the
// CPU. A device this binary cannot drive is a bad_arguments error that
// says which binary can.
func (w *Worker) backend(device string) (policy.OpenBackend, error) {
	return worker.Accelerator(device, w.devices)
}

// closePolicy releases p's backend (device memory, a CUDA context).
func (w *Worker) closePolicy(p *policy.ActorCritic) {
	if p == nil {
		return
	}
	if err := p.Close(); err != nil {
		w.log.Warn("close the policy's backend", "err", err)
	}
}

func (w *Worker) closeStreams() error {
	w.closePolicy(w.policy)
	w.policy = nil
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
	if w.kept != nil {
		if err := w.kept.close(); err != nil {
			errs = append(errs, fmt.Errorf("policy worker: close the kept versions' mirror: %w", err))
		}
		w.kept = nil
	}
	return errors.Join(errs...)
}
