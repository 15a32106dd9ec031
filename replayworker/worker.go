package replayworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nameresolve/names"
	"github.com/distrl/distrl/replay"
	"github.com/distrl/distrl/replaystream"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	zmq "github.com/pebbe/zmq4"
)

// TypeName is the worker type name ("replay/0", ...).
const TypeName = member.TypeReplay

const (
	requestsPerPoll = 256
	keepCheckpoints = 3
	// DefaultMaxSize is a table's max_size when the config leaves it out.
	DefaultMaxSize = 100_000
)

// Config is the configure kwargs.
type Config struct {
	// Stream is the replay stream's name (default "default").
	Stream string `msgpack:"stream"`
	// Tables; default one prioritized table "default" (alpha 0.6, beta
	// 0.4). A table's zero sampler, remover and max_size take the
	// defaults prioritized, fifo and DefaultMaxSize.
	Tables []replay.Options `msgpack:"tables"`
	// CheckpointDir: where tables are checkpointed and resumed from.
	CheckpointDir   string `msgpack:"checkpoint_dir"`
	CheckpointEvery int    `msgpack:"checkpoint_every_s"` // seconds, default 30
	Seed            *int64 `msgpack:"seed"`
}

// Worker is the replay worker type, used from its worker's loop only.
type Worker struct {
	info    worker.Info
	log     *slog.Logger
	metrics *telemetry.Worker // each table records through its part
	cfg     Config
	srv     *replaystream.Server
	tables  map[string]*table
	parked  []*parked
	// counters of requests
	waits, timeouts, badPriority, unknownTable int64
	ckpts                                      int64
	lastCkpt                                   time.Time
	ckptDone                                   chan struct{} // closed when the background write ends; nil if none
	rate                                       rateWindow
}

type table struct {
	*replay.Table
	caches map[string][]uint64 // actor -> ids of its live cache
	// metrics records the table's counters in Prometheus; recorded are
	// the counters when they were last recorded (see record).
	metrics  *telemetry.ReplayTable
	recorded replay.Counters
}

// newTable wraps t, recording from its counters as they are now: a table
// resumed from a checkpoint counts what this process does.
func newTable(t *replay.Table, m *telemetry.ReplayTable) *table {
	tb := &table{Table: t, caches: map[string][]uint64{}, metrics: m, recorded: t.Counters()}
	m.Items.Set(float64(tb.recorded.Size))
	return tb
}

// record adds what the table counted since the last call to its
// Prometheus counters: once per request, from the counters Stats reports,
// so that both agree however the request moved items.
func (t *table) record() {
	c, last := t.Counters(), t.recorded
	t.recorded = c
	t.metrics.Items.Set(float64(c.Size))
	if d := c.Inserts - last.Inserts; d > 0 {
		t.metrics.Inserts.Add(float64(d))
	}
	if d := c.Samples - last.Samples; d > 0 {
		t.metrics.Samples.Add(float64(d))
	}
}

// parked is a request the rate limiter held back, with what it has done.
type parked struct {
	req      *replaystream.Request
	deadline time.Time
	ids      []int64 // inserts done so far
	counted  bool    // its wait is counted
	why      string  // the limiter's reason, the last time it was held back
}

var (
	_ worker.SocketOwner = (*Worker)(nil)
	_ worker.Commander   = (*Worker)(nil)
	_ worker.Deadliner   = (*Worker)(nil)
)

// IdleFor is the time to the first parked request's deadline: an idle
// worker wakes to answer it. Requests that could let a parked one through
// arrive on the socket and wake the worker anyway.
func (w *Worker) IdleFor() time.Duration {
	if len(w.parked) == 0 {
		return time.Hour
	}
	first := w.parked[0].deadline
	for _, p := range w.parked[1:] {
		if p.deadline.Before(first) {
			first = p.deadline
		}
	}
	return time.Until(first) + time.Millisecond
}

// New is the worker.Factory of the replay type.
func New(info worker.Info) (worker.Impl, error) {
	return &Worker{info: info, log: info.Log(), metrics: info.Telemetry()}, nil
}

// Type is the replay worker type, for a worker.Registry: each shard keeps
// its checkpoints in a directory of its own under the trial's (their
// tables share names).
func Type() worker.Type {
	return worker.Type{Name: TypeName, New: New, Spec: member.Spec{Check: CheckConfig,
		CheckpointDir: func(base, group string, index int) string {
			return filepath.Join(base, names.WorkerName(group, index))
		}}}
}

// parseConfig decodes and checks the kwargs of "configure" for shard
// index: the configuration with its defaults, and each table's options
// (seeded from the shard and the clock). It opens nothing.
func parseConfig(args rpc.Args, index int) (Config, []replay.Options, error) {
	cfg := Config{Stream: replaystream.DefaultName}
	if err := worker.DecodeConfig(args, "replay config", &cfg); err != nil {
		return cfg, nil, err
	}
	if len(cfg.Tables) == 0 {
		cfg.Tables = []replay.Options{{Name: "default", Alpha: 0.6, Beta: 0.4}}
	}
	cfg.CheckpointEvery = cmp.Or(cfg.CheckpointEvery, 30)
	if index > replaystream.MaxShard {
		return cfg, nil, rpc.Errorf(rpc.ErrTypeBadArguments, "replay: index %d: at most %d shards", index, replaystream.MaxShard)
	}
	seed := int64(index)
	if cfg.Seed != nil {
		seed = *cfg.Seed
	}
	// A fresh table's ids: shard in the top bits, then a 24-bit epoch from
	// the clock, then a 32-bit count.
	firstID := uint64(index)<<replaystream.ShardShift | (uint64(time.Now().Unix())&0xffffff)<<32
	opts := make([]replay.Options, len(cfg.Tables))
	for i, o := range cfg.Tables {
		o.Sampler = cmp.Or(o.Sampler, replay.Prioritized)
		o.Remover = cmp.Or(o.Remover, replay.RemoveFIFO)
		o.MaxSize = cmp.Or(o.MaxSize, DefaultMaxSize)
		o.Seed = uint64(seed)*1000 + uint64(i)
		o.FirstID = firstID
		if err := o.Validate(); err != nil {
			return cfg, nil, rpc.Errorf(rpc.ErrTypeBadArguments, "replay: table %d: %v", i, err)
		}
		for _, prev := range opts[:i] {
			if prev.Name == o.Name {
				return cfg, nil, rpc.Errorf(rpc.ErrTypeBadArguments, "replay: table %q given twice", o.Name)
			}
		}
		opts[i] = o
	}
	return cfg, opts, nil
}

// CheckConfig checks the configure kwargs of replay shard index as
// Configure does, opening nothing (worker.Type.Check).
func CheckConfig(args rpc.Args, index int) error {
	_, _, err := parseConfig(args, index)
	return err
}

// Configure builds (or resumes) the tables and opens the server.
func (w *Worker) Configure(ctx context.Context, args rpc.Args) error {
	cfg, opts, err := parseConfig(args, w.info.Index)
	if err != nil {
		return err
	}
	tables := map[string]*table{}
	var ckpts int64
	for _, o := range opts {
		t, n, err := w.openTable(cfg.CheckpointDir, o)
		if err != nil {
			return err
		}
		// Checkpoints go on numbering from the newest resumed, so that
		// they stay the newest (and survive pruning) after a restart.
		ckpts = max(ckpts, n)
		tables[o.Name] = newTable(t, w.metrics.ReplayTable(o.Name))
	}
	if w.srv != nil {
		w.srv.Close()
		w.srv = nil
	}
	srv, err := replaystream.NewServer(ctx, replaystream.ServerOptions{Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial,
		Name: cfg.Stream, Index: w.info.Index, Host: w.info.Host, TTL: w.info.TTL, Logger: w.log})
	if err != nil {
		return fmt.Errorf("replay: %w", err)
	}
	w.cfg, w.srv, w.tables, w.parked, w.lastCkpt = cfg, srv, tables, nil, time.Now()
	w.ckpts = max(w.ckpts, ckpts)
	return nil
}

// openTable resumes a table from its newest valid checkpoint, keeping the
// configured options (a checkpoint of other options is refused), or makes
// a new one.
func (w *Worker) openTable(dir string, o replay.Options) (*replay.Table, int64, error) {
	if dir != "" {
		t, n, err := replay.LoadNewestCheckpoint(dir, o.Name, w.log)
		if err == nil {
			got := t.Options()
			o.Seed, o.FirstID = got.Seed, got.FirstID
			if got != o {
				return nil, 0, fmt.Errorf("replay: checkpoint %d of table %q was written with options %+v, configured %+v", n, o.Name, got, o)
			}
			w.log.Info("replay: table resumed", "table", o.Name, "checkpoint", n, "size", t.Counters().Size)
			return t, n, nil
		}
		if !errors.Is(err, replay.ErrNoCheckpoint) {
			return nil, 0, err
		}
	}
	t, err := replay.NewTable(o)
	return t, 0, err
}

// Poll serves the requests that have arrived and retries parked ones.
func (w *Worker) Poll(context.Context) (worker.PollResult, error) {
	if w.srv == nil {
		return worker.PollResult{}, errors.New("replay: not configured")
	}
	var res worker.PollResult
	reqs, err := w.srv.Recv(requestsPerPoll)
	for _, r := range reqs {
		res.Batches++
		res.Samples += w.serve(r, nil)
	}
	if err != nil {
		return res, fmt.Errorf("replay: %w", err)
	}
	if len(w.parked) > 0 {
		before := w.parked
		w.parked = nil
		now := time.Now()
		for _, p := range before {
			if now.After(p.deadline) {
				w.timeouts++
				w.fail(p, replaystream.ErrTypeRateLimited, "timeout_ms passed: "+p.why)
				continue
			}
			res.Samples += w.serve(p.req, p)
		}
	}
	if w.cfg.CheckpointDir != "" && time.Since(w.lastCkpt) > time.Duration(w.cfg.CheckpointEvery)*time.Second {
		w.checkpoint(true)
	}
	return res, nil
}

func (w *Worker) fail(p *parked, typ, msg string) {
	w.srv.Reply(p.req, &replaystream.Reply{Error: &rpc.Error{Type: typ, Message: msg}})
}

// serve handles one request (p non-nil: a parked one) and returns the
// items it moved.
func (w *Worker) serve(r *replaystream.Request, p *parked) int64 {
	t := w.tables[r.Table]
	if t == nil {
		w.unknownTable++
		w.srv.Reply(r, &replaystream.Reply{Error: &rpc.Error{Type: replaystream.ErrTypeNoTable,
			Message: fmt.Sprintf("no table %q", r.Table)}})
		return 0
	}
	n := w.serveOn(t, r, p)
	t.record()
	return n
}

// serveOn handles one request on its table t.
func (w *Worker) serveOn(t *table, r *replaystream.Request, p *parked) int64 {
	if p == nil {
		p = &parked{req: r, deadline: time.Now().Add(time.Duration(r.TimeoutMs) * time.Millisecond)}
	}
	switch r.Op {
	case replaystream.OpInsert:
		return w.insert(t, p)
	case replaystream.OpCache:
		return w.cache(t, r)
	case replaystream.OpSample:
		s, err := t.TrySample(r.N)
		if errors.Is(err, replay.ErrWouldBlock) {
			w.park(t, p, err)
			return 0
		}
		if err != nil {
			w.srv.Reply(r, &replaystream.Reply{Error: &rpc.Error{Type: replaystream.ErrTypeBadRequest, Message: err.Error()}})
			return 0
		}
		rep := &replaystream.Reply{Items: make([][]byte, len(s)), Size: t.Counters().Size}
		ids, pr, pb, wt := make([]int64, len(s)), make([]float64, len(s)), make([]float64, len(s)), make([]float64, len(s))
		for i, it := range s {
			rep.Items[i], ids[i], pr[i], pb[i], wt[i] = it.Data, int64(it.ID), it.Priority, it.Probability, it.Weight
		}
		rep.IDs, rep.Priorities = vec(ids), vec(pr)
		rep.Probabilities, rep.Weights = vec(pb), vec(wt)
		w.srv.Reply(r, rep)
		w.rate.samples += int64(len(s))
		return int64(len(s))
	case replaystream.OpUpdate:
		ids := make([]uint64, r.IDs.Len())
		for i, id := range r.IDs.Data {
			ids[i] = uint64(id)
		}
		u, err := t.UpdatePriorities(ids, r.Priorities.Data)
		if err != nil {
			w.badPriority++
			w.srv.Reply(r, &replaystream.Reply{Error: &rpc.Error{Type: replaystream.ErrTypeBadPriority, Message: err.Error()}})
			return 0
		}
		w.srv.Reply(r, &replaystream.Reply{Updated: u.Updated, Unknown: u.Unknown, Size: t.Counters().Size})
		return 0
	}
	return 0
}

func vec[T api.Numeric](d []T) api.Tensor[T] { return api.Tensor[T]{Shape: []int{len(d)}, Data: d} }

// park keeps p, a request on table t, for the next poll, counting its
// wait once.
func (w *Worker) park(t *table, p *parked, err error) {
	if !p.counted {
		p.counted = true
		w.waits++
		t.metrics.LimiterWaits.Inc()
	}
	p.why = err.Error()
	w.parked = append(w.parked, p)
}

// insert inserts what is left of an insert request; a limiter that closes
// part way parks the rest.
func (w *Worker) insert(t *table, p *parked) int64 {
	r := p.req
	for _, pr := range r.Priorities.Data {
		if !(pr >= 0) || pr > 1e300 {
			w.badPriority++
			w.srv.Reply(r, &replaystream.Reply{Error: &rpc.Error{Type: replaystream.ErrTypeBadPriority,
				Message: fmt.Sprintf("priority %v: want finite and >= 0; nothing inserted", pr)}})
			return 0
		}
	}
	start := len(p.ids)
	for i := start; i < len(r.Items); i++ {
		id, err := t.TryInsert(r.Priorities.Data[i], r.Items[i])
		if err != nil {
			if errors.Is(err, replay.ErrWouldBlock) {
				w.park(t, p, err)
				return int64(i - start)
			}
			w.srv.Reply(r, &replaystream.Reply{Error: &rpc.Error{Type: replaystream.ErrTypeBadRequest, Message: err.Error()}})
			return int64(i - start)
		}
		p.ids = append(p.ids, int64(id))
		w.rate.inserts++
	}
	w.srv.Reply(r, &replaystream.Reply{IDs: vec(p.ids), Size: t.Counters().Size})
	return int64(len(r.Items) - start)
}

// cache replaces an actor's previous cache with this one, each item at
// priority Sum/len(Items) (two-phase sampling; see package localreplay).
// A cache is never held back: it replaces what the actor had.
func (w *Worker) cache(t *table, r *replaystream.Request) int64 {
	t.Delete(t.caches[r.Actor])
	prio := r.Sum / float64(len(r.Items))
	ids := make([]uint64, 0, len(r.Items))
	out := make([]int64, 0, len(r.Items))
	for _, it := range r.Items {
		id, err := t.TryInsert(prio, it)
		if err != nil {
			break // the limiter is closed: the rest of this cache waits for the next one
		}
		ids, out = append(ids, id), append(out, int64(id))
	}
	t.caches[r.Actor] = ids
	w.srv.Reply(r, &replaystream.Reply{IDs: vec(out), Size: t.Counters().Size})
	w.rate.inserts += int64(len(ids))
	return int64(len(ids))
}

// checkpoint snapshots every table, which is quick (items' bytes are
// shared), and writes the snapshots. In the background, the worker goes on
// serving while hundreds of MB reach the disk; at most one write is in
// flight, and a checkpoint due while one is being written waits for the
// next poll after it. Otherwise it writes now, after any write in flight.
func (w *Worker) checkpoint(background bool) {
	if w.ckptDone != nil {
		if background {
			select {
			case <-w.ckptDone:
			default:
				return
			}
		}
		<-w.ckptDone
		w.ckptDone = nil
	}
	w.lastCkpt = time.Now()
	w.ckpts++
	n, dir := w.ckpts, w.cfg.CheckpointDir
	snaps := make([]*replay.State, 0, len(w.tables))
	for _, t := range w.tables {
		snaps = append(snaps, t.Snapshot())
	}
	write := func() {
		for _, st := range snaps {
			if _, err := st.WriteCheckpoint(dir, n, keepCheckpoints); err != nil {
				w.log.Warn("replay: checkpoint failed", "table", st.Options.Name, "err", err)
			}
		}
	}
	if !background {
		write()
		return
	}
	done := make(chan struct{})
	w.ckptDone = done
	go func() {
		defer close(done)
		write()
	}()
}

// Sockets is the server's socket.
func (w *Worker) Sockets() []*zmq.Socket {
	if w.srv == nil {
		return nil
	}
	return []*zmq.Socket{w.srv.Socket()}
}

// Commands adds "checkpoint" (write every table now) and "tables" (each
// table's options and counters).
func (w *Worker) Commands() map[string]rpc.Handler {
	return map[string]rpc.Handler{
		"checkpoint": func(context.Context, rpc.Args) (any, error) {
			if w.cfg.CheckpointDir == "" {
				return nil, rpc.Errorf(rpc.ErrTypeBadArguments, "replay: no checkpoint_dir configured")
			}
			w.checkpoint(false)
			return map[string]any{"checkpoints": w.ckpts}, nil
		},
		"tables": func(context.Context, rpc.Args) (any, error) {
			out := map[string]any{}
			for name, t := range w.tables {
				out[name] = map[string]any{"options": t.Options(), "counters": t.Counters()}
			}
			return out, nil
		},
	}
}

// rateWindow turns the counts since the last stats call into rates.
type rateWindow struct {
	inserts, samples int64
	since            time.Time
	insertsPerS      float64
	samplesPerS      float64
}

func (r *rateWindow) update() {
	now := time.Now()
	if !r.since.IsZero() {
		if dt := now.Sub(r.since).Seconds(); dt > 0.2 {
			r.insertsPerS, r.samplesPerS = float64(r.inserts)/dt, float64(r.samples)/dt
			r.inserts, r.samples, r.since = 0, 0, now
		}
		return
	}
	r.since = now
}

// Stats reports the tables' totals (summed) and per table.
func (w *Worker) Stats() map[string]any {
	w.rate.update()
	var sum replay.Counters
	per := map[string]any{}
	for name, t := range w.tables {
		c := t.Counters()
		per[name] = c
		sum.Size += c.Size
		sum.Inserts += c.Inserts
		sum.Samples += c.Samples
		sum.Evictions += c.Evictions
		sum.PriorityUpdates += c.PriorityUpdates
		sum.UnknownUpdates += c.UnknownUpdates
		sum.RefusedUpdates += c.RefusedUpdates
	}
	out := map[string]any{
		"size": sum.Size, "inserts": sum.Inserts, "samples": sum.Samples, "evictions": sum.Evictions,
		"priority_updates": sum.PriorityUpdates, "unknown_updates": sum.UnknownUpdates,
		"refused_updates": sum.RefusedUpdates, "bad_priority_requests": w.badPriority, "inserts_per_s": w.rate.insertsPerS,
		"samples_per_s": w.rate.samplesPerS, "limiter_waits": w.waits, "limiter_timeouts": w.timeouts,
		"parked": len(w.parked), "unknown_table": w.unknownTable, "checkpoints": w.ckpts, "tables": per,
	}
	if sum.Inserts > 0 {
		out["samples_per_insert"] = float64(sum.Samples) / float64(sum.Inserts)
	}
	if w.srv != nil {
		st := w.srv.Stats()
		out["requests"], out["malformed"], out["undeliverable"] = st.Requests, st.Malformed, st.Undeliverable
	}
	return out
}

// Close writes a last checkpoint, after any in the background, and
// closes the server.
func (w *Worker) Close() error {
	if w.cfg.CheckpointDir != "" && w.tables != nil {
		w.checkpoint(false)
	}
	if w.srv == nil {
		return nil
	}
	err := w.srv.Close()
	w.srv = nil
	return err
}
