package sinkworker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"

	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
)

// TypeName is the worker type name ("sink/0", "sink/1", ...).
const TypeName = member.TypeSink

const (
	// batchesPerPoll bounds one Poll, so requests to the worker are
	// answered between slices even under a flood of batches.
	batchesPerPoll = 64
)

// Config is the configure kwargs. Index and Host default to the worker's.
type Config struct {
	Stream string  `msgpack:"stream"`
	Index  *int    `msgpack:"index"`
	Host   *string `msgpack:"host"`
	// Seed is accepted because the controller gives every worker one
	// (experiment.Config.WorkerConfig); the sink draws nothing at random.
	Seed *int64 `msgpack:"seed"`
}

// Worker is the sink worker type. Like every worker type, it is used only
// from its worker's loop goroutine.
type Worker struct {
	info worker.Info
	log  *slog.Logger
	cons *stream.SampleConsumer
	// metrics records in Prometheus what Stats counts: the same events,
	// counted per batch.
	metrics *telemetry.Sink

	batches, steps, episodes int64
	returnSum                float64 // of every finished episode
	recent                   [member.ReturnWindow]float32
	nRecent                  int // episodes in recent, at most member.ReturnWindow
	byActor                  map[string]int64
	// Counters of consumers closed by a reconfigure, so the figures
	// cover the worker's whole life.
	oldMalformed, oldBytes int64
}

var (
	_ worker.SocketOwner = (*Worker)(nil)
	_ worker.Commander   = (*Worker)(nil)
)

// New is the worker.Factory of the sink type.
func New(info worker.Info) (worker.Impl, error) {
	return &Worker{info: info, log: info.Log(), metrics: info.Telemetry().Sink(), byActor: map[string]int64{}}, nil
}

// Type is the sink worker type, for a worker.Registry.
func Type() worker.Type {
	return worker.Type{Name: TypeName, New: New, Spec: member.Spec{Check: CheckConfig}}
}

// parseConfig decodes and checks the kwargs of "configure" for sink index.
func parseConfig(args rpc.Args, index int) (Config, error) {
	cfg := Config{Stream: stream.DefaultStream}
	if err := worker.DecodeConfig(args, "sink config", &cfg); err != nil {
		return cfg, err
	}
	if cfg.Index != nil {
		index = *cfg.Index
	}
	if index < 0 {
		return cfg, rpc.Errorf(rpc.ErrTypeBadArguments, "sink config: index %d is negative", index)
	}
	return cfg, nil
}

// CheckConfig checks sink index's configure kwargs as Configure does,
// opening nothing (worker.Type.Check).
func CheckConfig(args rpc.Args, index int) error {
	_, err := parseConfig(args, index)
	return err
}

// Configure opens the sample consumer; a reconfigure replaces it.
func (w *Worker) Configure(ctx context.Context, args rpc.Args) error {
	cfg, err := parseConfig(args, w.info.Index)
	if err != nil {
		return err
	}
	opts := stream.SampleConsumerOptions{
		Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial, Stream: cfg.Stream,
		Index: w.info.Index, Host: w.info.Host, TTL: w.info.TTL, Logger: w.log,
		Reuse: true, // Poll counts the batches and keeps none
	}
	if cfg.Index != nil {
		opts.Index = *cfg.Index
	}
	if cfg.Host != nil {
		opts.Host = *cfg.Host
	}
	// Close the old consumer first: the new one may take the same record.
	if err := w.closeConsumer(); err != nil {
		w.log.Warn("sink: closing the previous consumer", "err", err)
	}
	cons, err := stream.NewSampleConsumer(ctx, opts)
	if err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	w.cons = cons
	return nil
}

// Poll takes up to 64 batches that have arrived and counts them.
func (w *Worker) Poll(context.Context) (worker.PollResult, error) {
	if w.cons == nil {
		return worker.PollResult{}, errors.New("sink: not configured")
	}
	batches, err := w.cons.Poll(batchesPerPoll)
	var res worker.PollResult
	for _, b := range batches {
		n := int64(b.Len())
		w.batches++
		w.steps += n
		w.byActor[b.ActorID]++
		for _, e := range b.Episodes {
			w.episodes++
			w.returnSum += float64(e.Return)
			w.recent[w.nRecent%member.ReturnWindow] = e.Return
			w.nRecent++
		}
		w.metrics.Samples.Add(float64(n))
		w.metrics.Episodes.Add(float64(len(b.Episodes)))
		res.Samples += n
		res.Batches++
	}
	if err != nil {
		return res, fmt.Errorf("sink: %w", err)
	}
	return res, nil
}

// Sockets is the consumer's PULL socket, so an idle sink wakes when a
// batch arrives.
func (w *Worker) Sockets() []*zmq.Socket {
	if w.cons == nil {
		return nil
	}
	return []*zmq.Socket{w.cons.Socket()}
}

// Stats reports what arrived.
func (w *Worker) Stats() map[string]any {
	var malformed, bytes int64 = w.oldMalformed, w.oldBytes
	if w.cons != nil {
		st := w.cons.Stats()
		malformed += st.Malformed
		bytes += st.Bytes
	}
	var mean float64
	if k := min(w.nRecent, member.ReturnWindow); k > 0 {
		for _, r := range w.recent[:k] {
			mean += float64(r)
		}
		mean /= float64(k)
	}
	return map[string]any{
		"batches":             w.batches,
		"steps":               w.steps,
		member.StatEpisodes:   w.episodes,
		"returns_sum":         w.returnSum,
		"mean_episode_return": mean,
		"by_actor":            maps.Clone(w.byActor),
		"malformed":           malformed,
		"bytes":               bytes,
	}
}

// Commands adds "summary", which returns the same figures as the stats.
func (w *Worker) Commands() map[string]rpc.Handler {
	return map[string]rpc.Handler{
		"summary": func(context.Context, rpc.Args) (any, error) { return w.Stats(), nil },
	}
}

// Close closes the consumer, removing its endpoint record.
func (w *Worker) Close() error { return w.closeConsumer() }

func (w *Worker) closeConsumer() error {
	if w.cons == nil {
		return nil
	}
	st := w.cons.Stats()
	w.oldMalformed += st.Malformed
	w.oldBytes += st.Bytes
	err := w.cons.Close()
	w.cons = nil
	return err
}
