package trainerworker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/distrl/distrl/algo/ppo"
	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/collective"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/paramstream"
	"github.com/distrl/distrl/policy"
	"github.com/distrl/distrl/rpc"
	"github.com/distrl/distrl/stream"
	"github.com/distrl/distrl/telemetry"
	"github.com/distrl/distrl/worker"
	"github.com/distrl/distrl/worker/member"
	"github.com/distrl/distrl/worker/offload"
	zmq "github.com/pebbe/zmq4"
	"github.com/vmihailenco/msgpack/v5"
)

// TypeName is the worker type name ("trainer/0", ...).
const TypeName = member.TypeTrainer

const (
	// batchesPerPoll and fetchesPerPoll bound one Poll's intake, so that
	// requests to the worker are answered between slices of work.
	batchesPerPoll = 64
	fetchesPerPoll = 64
	// publishTimeout bounds the name-resolve write of one Publish.
	publishTimeout = 5 * time.Second
	// maxUpdateFailures is how many updates in a row may fail with a
	// non-finite gradient (each rolled back and its samples dropped)
	// before the trainer gives up and moves to ERROR.
	maxUpdateFailures = 3
	// recvHWM is how many sample messages from each actor may wait in the
	// trainer's socket (a high-water mark counts per connection). Waiting
	// batches age with every update, so the queue is kept short (with the
	// actors' sample_queue): when it is full, actors stop stepping rather
	// than make steps that would be dropped as stale.
	recvHWM = 2
	// logEvery rate-limits the log lines of recurring events.
	logEvery = 5 * time.Second
)

// ppoTrainer is the trainer of algorithm "ppo": on-policy, from a sample
// stream. Like every worker.Impl, all its methods run on the worker's loop
// goroutine.
type ppoTrainer struct {
	info worker.Info
	log  *slog.Logger
	busy *busyClock

	set     settings
	learner *ppo.Learner
	spec    nn.Spec // the learner's network's, for checking batches
	cons    *stream.SampleConsumer
	pub     *paramstream.Publisher
	keeper  *keeper      // nil: keeps no versions
	grp     *groupMember // nil: learning alone

	// version is the version of the learner's parameters: the number of
	// updates since version 0 of this run, checkpoints included.
	version int64
	buffer  []*api.SampleBatch
	bufLen  int                // agent steps in buffer
	spare   []*api.SampleBatch // the last update's buffer, emptied, for the next
	// job runs the updates while the loop takes samples in
	// (settings.overlap); nil: the loop updates in turn with its intake.
	job     *offload.Job[updated]
	running pendingUpdate // the update on job, while job.Running()
	// full is whether the buffer held an update's worth at the end of the
	// last Poll (the consumer's socket is then not watched), and fullFlips
	// counts its changes, for SocketsVersion.
	full      bool
	fullFlips uint64
	ckptVer   int64 // version of the newest checkpoint written or loaded; -1 none
	resumed   int64 // version restored at configure; -1 for a fresh start
	failed    int   // consecutive failed updates

	st       counters
	metrics  metrics
	lastLog  time.Time
	warnings map[string]string // by source; see Warning
	engines  Engines
}

var (
	_ worker.Impl         = (*ppoTrainer)(nil)
	_ worker.SocketOwner  = (*ppoTrainer)(nil)
	_ worker.Reporter     = (*ppoTrainer)(nil)
	_ worker.SocketSetter = (*ppoTrainer)(nil)
)

func newPPO(info worker.Info, m *telemetry.Trainer, engines Engines, busy *busyClock) *ppoTrainer {
	return &ppoTrainer{info: info, log: info.Log(), ckptVer: -1, resumed: -1, st: newCounters(), metrics: metrics{m},
		warnings: map[string]string{}, engines: engines, busy: busy}
}

func (w *ppoTrainer) overlaps() bool { return w.job != nil }

// Configure builds the learner, resumes from the newest valid checkpoint
// of checkpoint_dir if there is one, opens the sample consumer and the
// parameter publisher, and publishes the starting version, so that policy
// workers serve the trainer's parameters from the first step.
//
// A worker configured again first checkpoints what it has (so a new
// configuration on the same directory resumes from it), then starts over.
// A bad configuration is a bad_arguments error that leaves the worker as
// it was.
func (w *ppoTrainer) Configure(ctx context.Context, args rpc.Args) error {
	s, err := parseConfig(args, w.info.Index)
	if err != nil {
		return err
	}
	pol, err := policy.New(s.policy)
	if err != nil {
		return badConfig("%v", err)
	}
	net := pol.Net()
	s.hash = configHash(s.cfg.Policy, net.Spec())
	learner, err := ppo.NewLearner(net, s.ppo)
	if err != nil {
		return badConfig("%v", err)
	}
	learner.SetThreads(s.cfg.Threads.N())
	open, err := worker.Accelerator(s.cfg.Device, w.engines)
	if err != nil {
		return err
	}
	if open != nil {
		// A device that cannot be opened (absent, out of memory) is the
		// configuration's fault, as for a policy worker.
		if err := learner.SetEngine(open); err != nil {
			return badConfig("device %s: %v", s.cfg.Device, err)
		}
	}
	if w.learner != nil {
		w.settle(ctx)
		w.finalCheckpoint()
		w.closeLearner()
	}
	w.closeJob()
	var job *offload.Job[updated]
	if s.overlap {
		if job, err = offload.New[updated](); err != nil {
			_ = learner.Close()
			return fmt.Errorf("trainer: %w", err)
		}
	}
	var restored *Checkpoint
	// In a group, rank 0's state is everyone's: only it resumes.
	if s.cfg.CheckpointDir != "" && (s.cfg.GroupSize <= 1 || w.info.Index == 0) {
		if restored, err = w.restore(s, learner); err != nil {
			_ = learner.Close()
			if job != nil {
				_ = job.Close()
			}
			return err
		}
	}
	if err := w.closeStreams(); err != nil {
		w.log.Warn("trainer: closing the previous streams", "err", err)
	}
	w.set, w.learner, w.spec, w.job = s, learner, net.Spec(), job
	w.version, w.ckptVer, w.resumed = 0, -1, -1
	w.buffer, w.bufLen, w.spare, w.failed, w.full = nil, 0, nil, 0, false
	w.st = newCounters()
	clear(w.warnings)
	if restored != nil {
		w.version, w.ckptVer, w.resumed = restored.Version, restored.Version, restored.Version
		w.st.trained, w.st.updates, w.st.episodes = restored.Samples, restored.Updates, restored.Episodes
	}
	w.metrics.Version.Set(float64(w.version))
	// The version is published before the consumer opens: actors send to
	// the consumer as soon as it is registered, and their batches should
	// come from the parameters this trainer starts with. In a group, rank
	// 0 publishes for all.
	if s.cfg.GroupSize <= 1 || w.info.Index == 0 {
		w.pub, err = paramstream.NewPublisher(ctx, paramstream.PublisherOptions{
			Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial, Policy: s.cfg.Policy,
			Host: w.info.Host, TTL: w.info.TTL, Logger: w.log,
		})
		if err != nil {
			w.abandon()
			return fmt.Errorf("trainer: parameter publisher: %w", err)
		}
		w.keeper = newKeeper(w.info, s.cfg.KeepConfig, s.cfg.Policy, s.cfg.CheckpointDir)
		if err := w.publish(ctx); err != nil {
			w.abandon()
			return err
		}
	}
	w.grp, err = joinGroup(ctx, w.info, w.metrics.Trainer, s.cfg.Policy, s.cfg.GroupConfig, s.groupHash(), w.answerFetches)
	if err != nil {
		w.abandon()
		return err
	}
	w.cons, err = stream.NewSampleConsumer(ctx, stream.SampleConsumerOptions{
		Repo: w.info.Repo, Curve: w.info.Curve, Trial: w.info.Trial, Stream: s.cfg.SampleStream,
		Index: w.info.Index, Host: w.info.Host, TTL: w.info.TTL, Logger: w.log,
		RecvHWM: recvHWM,
	})
	if err != nil {
		w.abandon()
		return fmt.Errorf("trainer: sample consumer: %w", err)
	}
	w.log.Info("trainer configured", "policy", s.cfg.Policy, "env", s.cfg.Env,
		"params", net.NumParams(), "version", w.version, "resumed", restored != nil,
		"batch_steps", s.cfg.BatchSteps, "max_staleness", s.staleness, "lr", s.ppo.LR,
		"checkpoint_dir", s.cfg.CheckpointDir, "threads", s.cfg.Threads.N(), "group_size", s.cfg.GroupSize, "rank", w.info.Index,
		"device", cmp.Or(s.cfg.Device, worker.DeviceCPU), "overlap", s.overlap)
	return nil
}

// abandon drops a configuration that failed half way: the worker is in
// ERROR and must not checkpoint or serve it.
func (w *ppoTrainer) abandon() {
	w.closeJob()
	w.closeLearner()
	w.learner = nil
	if err := w.closeStreams(); err != nil {
		w.log.Warn("trainer: closing the streams of a failed configure", "err", err)
	}
}

// restore loads the newest valid checkpoint of s's directory into learner.
// It returns nil and no error if there is none.
func (w *ppoTrainer) restore(s settings, learner *ppo.Learner) (*Checkpoint, error) {
	c, path, err := LoadNewestCheckpoint(s.cfg.CheckpointDir, w.log)
	switch {
	case errors.Is(err, ErrNoCheckpoint):
		w.log.Info("trainer: starting from version 0", "why", err)
		return nil, nil
	case err != nil:
		return nil, err
	}
	if c.ConfigHash != s.hash {
		// Another run's directory: resuming would at best fail on the
		// parameter count, at worst train someone else's policy.
		return nil, rpc.Errorf(rpc.ErrTypeBadArguments, "%v", fmt.Errorf(
			"%w: %s was written for policy %q with config hash %s, this trainer is %q with %s",
			ErrCheckpointMismatch, path, c.Policy, c.ConfigHash, s.cfg.Policy, s.hash))
	}
	if err := learner.Restore(c.Learner); err != nil {
		return nil, fmt.Errorf("trainer: restore %s: %w", path, err)
	}
	w.log.Info("trainer: resumed from checkpoint", "path", path, "version", c.Version, "updates", c.Updates)
	return c, nil
}

// Poll answers parameter fetches, takes the sample batches that have
// arrived and, once batch_steps steps are buffered, runs one update.
func (w *ppoTrainer) Poll(ctx context.Context) (worker.PollResult, error) {
	var res worker.PollResult
	if w.learner == nil {
		return res, errors.New("trainer: polled before configure")
	}
	if w.st.since.IsZero() {
		w.st.since = time.Now()
		w.st.rate.add(w.st.since, w.st.trained)
	}
	if err := w.answerFetches(); err != nil {
		return res, err
	}
	// A member of a group takes nothing until the group has formed and
	// its state is rank 0's: samples wait in the stream meanwhile.
	if ok, err := w.grp.ready(ctx, w.sync); err != nil || !ok {
		return res, err
	}
	if w.updating() {
		if r, ok := w.job.Done(); ok {
			if err := w.finishUpdate(ctx, w.running, r.Value, r.Err); err != nil {
				return res, err
			}
			// Policy workers fetch right after the notification.
			if err := w.answerFetches(); err != nil {
				return res, err
			}
		}
	}
	// One batch at a time, stopping when an update's worth is buffered:
	// the rest stays queued, where it pushes back on the actors instead of
	// growing this update past batch_steps (its share of them in a group)
	// or going stale in a buffer.
	for range batchesPerPoll {
		if w.bufLen >= w.set.memberSteps {
			break
		}
		batches, err := w.cons.Poll(1)
		if err != nil {
			return res, fmt.Errorf("trainer: %w", err)
		}
		if len(batches) == 0 {
			break
		}
		b := batches[0]
		res.Samples += int64(b.Len())
		res.Batches++
		w.take(b)
	}
	if w.bufLen >= w.set.memberSteps && !w.updating() && !w.reachedMax() {
		// A member waits for the others' shares without blocking.
		if ok, err := w.grp.arrive(); err != nil || !ok {
			w.noteFull()
			return res, err
		}
		if w.job != nil {
			if err := w.startUpdate(); err != nil {
				return res, err
			}
		} else {
			if err := w.update(ctx); err != nil {
				return res, err
			}
			// Policy workers fetch right after the notification; answer
			// them now rather than after the next intake.
			if err := w.answerFetches(); err != nil {
				return res, err
			}
		}
	}
	w.noteFull()
	res.Done = w.reachedMax()
	return res, nil
}

// updating reports whether an update runs on the job.
func (w *ppoTrainer) updating() bool { return w.job != nil && w.job.Running() }

// reachedMax reports whether the trainer has made max_updates versions.
func (w *ppoTrainer) reachedMax() bool {
	return w.set.cfg.MaxUpdates > 0 && w.version >= w.set.cfg.MaxUpdates
}

// noteFull records whether the buffer holds an update's worth: while it
// does, the consumer's socket is left out of Sockets (the batches waiting
// there would wake the loop at once, again and again, with nothing it
// could take), and the loop sleeps until the update finishes.
func (w *ppoTrainer) noteFull() {
	if full := w.bufLen >= w.set.memberSteps; full != w.full {
		w.full = full
		w.fullFlips++
	}
}

func (w *ppoTrainer) answerFetches() error { return answerFetches(w.pub) }

// answerFetches answers the parameter fetches waiting on pub, which is
// nil on a group's member other than rank 0.
func answerFetches(pub *paramstream.Publisher) error {
	if pub == nil {
		return nil
	}
	if _, err := pub.Poll(fetchesPerPoll); err != nil {
		return fmt.Errorf("trainer: answer parameter fetches: %w", err)
	}
	return nil
}

// take accounts for one batch and buffers it unless it is unusable or too
// stale; one it does not buffer goes back to the consumer.
func (w *ppoTrainer) take(b *api.SampleBatch) {
	if !w.keep(b) {
		w.recycle(b)
	}
}

// keep is take but for the recycling: it reports whether b was buffered.
func (w *ppoTrainer) keep(b *api.SampleBatch) bool {
	n := b.Len()
	if err := w.check(b); err != nil {
		w.st.rejected++
		w.warnings["batch"] = fmt.Sprintf("%d sample batches rejected; the last: %v", w.st.rejected, err)
		w.logRated("trainer: sample batch rejected", "actor", b.ActorID, "err", err, "rejected", w.st.rejected)
		return false
	}
	w.st.agents.add(b.AgentID)
	// Every episode counts towards the return, stale or not: it happened,
	// and it is the best evidence of how recent policies do.
	for _, e := range b.Episodes {
		w.st.episodes++
		w.st.returns.add(float64(e.Return))
	}
	w.metrics.ended(len(b.Episodes), &w.st.returns)
	// The buffer is trained with the version the running update makes,
	// if one runs: that is the lag that counts.
	lag := w.version - b.PolicyVersion
	if w.updating() {
		lag++
	}
	switch {
	case b.PolicyVersion > w.version:
		// A version this trainer never made: the batch was collected with
		// parameters of a run this one resumed from an older checkpoint.
		w.st.droppedFuture++
		w.st.droppedSteps += int64(n)
		return false
	case lag > w.set.staleness:
		w.st.lags.add(float64(lag))
		w.metrics.PolicyLag.Observe(float64(lag))
		w.st.droppedStale++
		w.st.droppedSteps += int64(n)
		w.metrics.DroppedStale.Add(float64(n))
		return false
	}
	w.st.lags.add(float64(lag))
	w.metrics.PolicyLag.Observe(float64(lag))
	w.buffer = append(w.buffer, b)
	w.bufLen += n
	return true
}

// check verifies that PPO can use b, so that one bad batch is dropped here
// rather than failing the update it would be part of. It repeats what
// ppo.Learner.Update checks, where a failure could not be pinned on one
// batch.
func (w *ppoTrainer) check(b *api.SampleBatch) error {
	n := b.Len()
	spec := &w.spec
	switch {
	case b.Policy != "" && b.Policy != w.set.cfg.Policy:
		return fmt.Errorf("batch of policy %q, this trainer trains %q", b.Policy, w.set.cfg.Policy)
	case n == 0:
		return nil
	case !obsFits(b.Obs.Shape[1:], *spec):
		return fmt.Errorf("observations of shape %v, the network takes %d values (%v)", b.Obs.Shape[1:], spec.ObsDim, spec.InputShape)
	case len(b.LogProbs.Data) != n || len(b.Values.Data) != n:
		return errors.New("no behaviour log-probabilities or values")
	case !b.Obs.Binary() && !api.AllFinite(b.Obs.Data) || !api.AllFinite(b.Rewards.Data) || !api.AllFinite(b.LogProbs.Data) || !api.AllFinite(b.Values.Data):
		return errors.New("non-finite observations, rewards, log-probabilities or values")
	}
	if spec.Head == nn.Gaussian {
		if b.ContActions.IsZero() || b.ContActions.Shape[1] != spec.ActionDim || !api.AllFinite(b.ContActions.Data) {
			return fmt.Errorf("continuous actions of shape %v, want [%d, %d] and finite", b.ContActions.Shape, n, spec.ActionDim)
		}
		return nil
	}
	if b.Actions.IsZero() {
		return errors.New("no discrete actions")
	}
	for _, a := range b.Actions.Data {
		if a < 0 || int(a) >= spec.ActionDim {
			return fmt.Errorf("action %d outside [0, %d)", a, spec.ActionDim)
		}
	}
	return nil
}

// obsFits reports whether one observation of the given shape is the
// network's input: its ObsDim values flat ([ObsDim]), or its InputShape.
func obsFits(shape []int, spec nn.Spec) bool {
	if len(shape) == 1 {
		return shape[0] == spec.ObsDim
	}
	return slices.Equal(shape, spec.InputShape)
}

// testHookUpdate, set by tests only, runs before each update's
// arithmetic (PPO and DQN), on the goroutine that runs it.
var testHookUpdate atomic.Pointer[func()]

// runHook runs testHookUpdate if it is set.
func runHook() {
	if f := testHookUpdate.Load(); f != nil {
		(*f)()
	}
}

// updated is what an update on the job returns.
type updated struct {
	st   ppo.Stats
	took time.Duration
}

// pendingUpdate is an update begun: what finishing it needs.
type pendingUpdate struct {
	snap    ppo.LearnerState // to roll back to
	batches []*api.SampleBatch
	steps   int
}

// update runs one PPO update on the buffer, then checkpoints and
// publishes as configured. The buffer is used up either way: on-policy
// data that failed once would be staler next time.
func (w *ppoTrainer) update(ctx context.Context) error {
	p := w.beginUpdate()
	runHook()
	begin := time.Now()
	st, err := w.learner.UpdateGroup(ctx, p.batches, w.grp.reducer())
	return w.finishUpdate(ctx, p, updated{st: st, took: time.Since(begin)}, err)
}

// startUpdate runs the update of the buffer on the job; a later Poll
// finishes it. Until then only the job touches the learner.
func (w *ppoTrainer) startUpdate() error {
	p := w.beginUpdate()
	learner := w.learner
	if err := w.job.Start(func() (updated, error) {
		runHook()
		begin := time.Now()
		st, err := learner.Update(p.batches)
		return updated{st: st, took: time.Since(begin)}, err
	}); err != nil {
		return fmt.Errorf("trainer: %w", err)
	}
	w.running = p
	return nil
}

// settle waits for an update running on the job and finishes it, before
// the learner is checkpointed, replaced or closed.
func (w *ppoTrainer) settle(ctx context.Context) {
	if !w.updating() {
		return
	}
	r, _ := w.job.Wait()
	if err := w.finishUpdate(ctx, w.running, r.Value, r.Err); err != nil {
		w.log.Warn("trainer: finishing the last update", "err", err)
	}
}

// beginUpdate takes the buffer for an update, leaving an empty one, and
// snapshots the learner.
func (w *ppoTrainer) beginUpdate() pendingUpdate {
	// A snapshot to roll back to if a step turns out non-finite, so that
	// the learner never holds parameters that were neither published nor
	// checkpointed, and a later checkpoint cannot capture them.
	p := pendingUpdate{snap: w.learner.State(), batches: w.buffer, steps: w.bufLen}
	w.buffer, w.bufLen, w.spare = w.spare, 0, nil
	return p
}

// finishUpdate accounts for the update p, whose learner returned u and
// err: a failure is rolled back, a success makes a version (checkpointed
// and published as configured).
func (w *ppoTrainer) finishUpdate(ctx context.Context, p pendingUpdate, u updated, err error) error {
	w.busy.finished(u.took, !w.overlaps())
	w.spare = w.emptied(p.batches)
	st, steps := u.st, p.steps
	if err != nil {
		if rerr := w.learner.Restore(p.snap); rerr != nil {
			return fmt.Errorf("trainer: update failed (%w) and the rollback too: %w", err, rerr)
		}
		if errors.Is(err, collective.ErrBroken) {
			// A member is gone or silent: the group forms again and
			// starts from rank 0's state, which this rollback keeps
			// whole on rank 0.
			w.log.Warn("trainer: group broke during an update; its samples dropped, forming again", "version", w.version, "err", err)
			return nil
		}
		if !errors.Is(err, ppo.ErrNonFinite) {
			return fmt.Errorf("trainer: update at version %d: %w", w.version, err)
		}
		w.failed++
		w.st.updateFailures++
		w.warnings["update"] = fmt.Sprintf("update at version %d rolled back: %v", w.version, err)
		w.log.Warn("trainer: update rolled back, its samples dropped", "version", w.version, "err", err, "in_a_row", w.failed)
		if w.failed >= maxUpdateFailures {
			return fmt.Errorf("trainer: %d updates in a row failed: %w", w.failed, err)
		}
		return nil
	}
	now := time.Now()
	w.grp.updated()
	w.failed = 0
	delete(w.warnings, "update")
	if w.st.rejected == w.st.rejectedAtUpdate {
		delete(w.warnings, "batch")
	}
	w.st.rejectedAtUpdate = w.st.rejected
	w.version++
	w.st.updates++
	w.st.trained += int64(steps)
	w.st.last, w.st.hasLast = st, true
	w.st.lastUpdate = u.took
	w.st.rate.add(now, w.st.trained)
	w.metrics.updated(w.version, int64(steps))
	w.metrics.ppoLosses(st)
	if w.log.Enabled(ctx, slog.LevelDebug) {
		w.log.Debug("trainer: update", "version", w.version, "samples", steps, "policy_loss", st.PolicyLoss,
			"value_loss", st.ValueLoss, "approx_kl", st.ApproxKL, "ms", w.st.lastUpdate.Milliseconds())
	}
	done := w.set.cfg.MaxUpdates > 0 && w.version >= w.set.cfg.MaxUpdates
	if err := w.grp.checkParams(ctx, w.log, w.version, done, w.learner.Params()); err != nil {
		return err
	}
	if !w.grp.leads() {
		return nil
	}
	// Checkpoint before publishing: with equal cadences every version a
	// policy worker can hold is on disk, so a trainer resumed after a
	// crash never goes back behind what actors are using.
	if w.set.cfg.CheckpointDir != "" && (w.version%int64(w.set.cfg.CheckpointEvery) == 0 || done) {
		w.checkpoint()
	}
	if w.version%int64(w.set.cfg.PublishEvery) == 0 || done {
		return w.publish(ctx)
	}
	return nil
}

// publish makes the learner's parameters the newest version. Only a
// version that is not newer than the last published is an error; a failed
// name-resolve write is a warning, because the version reached connected
// subscribers anyway and the next Publish writes the record again.
func (w *ppoTrainer) publish(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, publishTimeout)
	defer cancel()
	err := w.pub.Publish(pctx, w.version, w.learner.Params())
	switch {
	case err == nil:
		delete(w.warnings, "publish")
		w.keeper.afterPublish(ctx, w.version, w.pub.Epoch(), w.learner.Params(), w.warnings)
	case errors.Is(err, paramstream.ErrStaleVersion) || errors.Is(err, paramstream.ErrClosed):
		return fmt.Errorf("trainer: publish: %w", err)
	default:
		w.warnings["publish"] = fmt.Sprintf("version %d published, but its record was not written: %v", w.version, err)
		w.logRated("trainer: parameter record not written", "version", w.version, "err", err)
	}
	return nil
}

// checkpoint writes the current state. A failure (a full disk, say) is a
// warning, not the end of training: the next checkpoint may succeed.
func (w *ppoTrainer) checkpoint() {
	c := &Checkpoint{
		Version: w.version, Learner: w.learner.State(),
		Samples: w.st.trained, Updates: w.st.updates, Episodes: w.st.episodes,
		ConfigHash: w.set.hash, Policy: w.set.cfg.Policy, UnixMs: time.Now().UnixMilli(),
	}
	path, err := WriteCheckpoint(w.set.cfg.CheckpointDir, c)
	if err != nil {
		w.st.ckptFailures++
		w.warnings["checkpoint"] = fmt.Sprintf("checkpoint of version %d failed: %v", w.version, err)
		w.log.Warn("trainer: checkpoint failed", "version", w.version, "err", err)
		return
	}
	delete(w.warnings, "checkpoint")
	w.ckptVer = w.version
	w.st.checkpoints++
	w.metrics.Checkpoints.Inc()
	if err := pruneCheckpoints(w.set.cfg.CheckpointDir, KeepCheckpoints); err != nil {
		w.log.Warn("trainer: pruning old checkpoints", "err", err)
	}
	w.log.Debug("trainer: checkpoint written", "path", path)
}

// finalCheckpoint saves the state on close or reconfigure if it is newer
// than the last checkpoint. Version 0 is never written: it is what the
// configuration makes anyway.
func (w *ppoTrainer) finalCheckpoint() {
	if w.learner != nil && w.grp.leads() && w.set.cfg.CheckpointDir != "" && w.version > w.ckptVer && w.version > 0 {
		w.checkpoint()
	}
}

func (w *ppoTrainer) logRated(msg string, args ...any) {
	if now := time.Now(); now.Sub(w.lastLog) >= logEvery {
		w.lastLog = now
		w.log.Warn(msg, args...)
	}
}

// Sockets lets an idle trainer wake for sample batches (unless its
// buffer is full) and fetches.
func (w *ppoTrainer) Sockets() []*zmq.Socket {
	var out []*zmq.Socket
	if w.cons != nil && !w.full {
		out = append(out, w.cons.Socket())
	}
	if w.pub != nil {
		out = append(out, w.pub.Socket())
	}
	return append(out, w.grp.sockets()...)
}

// WaitFds and PrepareWait: a group's member at the barrier also wakes for
// its shared-memory doorbell, and an overlapping trainer when its update
// is done.
func (w *ppoTrainer) WaitFds() []int    { return withJobFd(w.grp.waitFds(), w.job) }
func (w *ppoTrainer) PrepareWait() bool { return w.grp.prepareWait() }

// withJobFd adds an overlapping trainer's job's eventfd, if it has a job,
// to its wait descriptors.
func withJobFd[T any](fds []int, job *offload.Job[T]) []int {
	if job != nil {
		fds = append(fds, job.Fd())
	}
	return fds
}

// Note says where the trainer stands in its group, if it has one.
func (w *ppoTrainer) Note() string { return w.grp.note(w.st.lastUpdate) }

// SocketsVersion changes when the group's socket or the consumer's joins
// or leaves Sockets: both counts only grow, so their sum changes with
// either.
func (w *ppoTrainer) SocketsVersion() uint64 { return w.grp.socketsVersion() + w.fullFlips }

// Warning reports what degrades the trainer without stopping it: rejected
// batches, an update rolled back, a failed checkpoint or record write.
func (w *ppoTrainer) Warning() string {
	var parts []string
	if g := w.grp.warning(); g != "" {
		parts = append(parts, g)
	}
	for _, k := range []string{"update", "checkpoint", "publish", "batch"} {
		if m, ok := w.warnings[k]; ok {
			parts = append(parts, m)
		}
	}
	return strings.Join(parts, "; ")
}

// Close checkpoints the newest state (if there is a checkpoint_dir and it
// is not on disk yet) and closes the streams.
func (w *ppoTrainer) Close() error {
	w.settle(context.Background())
	w.finalCheckpoint()
	w.closeJob()
	w.closeLearner()
	return w.closeStreams()
}

// closeJob closes the update job, if there is one; settle has finished
// its update.
func (w *ppoTrainer) closeJob() {
	if w.job == nil {
		return
	}
	if err := w.job.Close(); err != nil {
		w.log.Warn("trainer: closing the update job", "err", err)
	}
	w.job = nil
}

// closeLearner releases the learner's engine, if it has one.
func (w *ppoTrainer) closeLearner() {
	if w.learner == nil {
		return
	}
	if err := w.learner.Close(); err != nil {
		w.log.Warn("trainer: closing the learner's engine", "err", err)
	}
}

func (w *ppoTrainer) closeStreams() error {
	var errs []error
	if w.cons != nil {
		errs = append(errs, w.cons.Close())
		w.cons = nil
	}
	if w.pub != nil {
		errs = append(errs, w.pub.Close())
		w.pub = nil
	}
	if w.grp != nil {
		errs = append(errs, w.grp.close())
		w.grp = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("trainer: close: %w", err)
	}
	return nil
}

// recycle hands batches back to the consumer to decode into: the learner
// keeps nothing of them.
func (w *ppoTrainer) recycle(batches ...*api.SampleBatch) {
	if w.cons != nil {
		w.cons.Recycle(batches...)
	}
}

// emptied recycles the batches of buf and returns it empty, for reuse.
func (w *ppoTrainer) emptied(buf []*api.SampleBatch) []*api.SampleBatch {
	w.recycle(buf...)
	clear(buf)
	return buf[:0]
}

// dropBuffer empties the buffer.
func (w *ppoTrainer) dropBuffer() {
	w.buffer, w.bufLen = w.emptied(w.buffer), 0
}

// groupState is what rank 0 hands the members of a new formation.
type groupState struct {
	Version int64            `msgpack:"version"`
	Updates int64            `msgpack:"updates"`
	Learner ppo.LearnerState `msgpack:"learner"`
}

// sync makes this member's state rank 0's, at every formation of the
// group: rank 0's current state (rolled back to the last completed update
// if the group broke in one), or, when rank 0 itself restarted, its last
// checkpoint. What a member had buffered is dropped: it was taken against
// a version that may no longer be the group's.
func (w *ppoTrainer) sync(ctx context.Context) error {
	err := w.grp.syncFrom(ctx, w.log, &w.version, func() ([]byte, error) {
		return msgpack.Marshal(groupState{Version: w.version, Updates: w.st.updates, Learner: w.learner.State()})
	}, func(b []byte) error {
		var st groupState
		if err := msgpack.Unmarshal(b, &st); err != nil {
			return err
		}
		if err := w.learner.Restore(st.Learner); err != nil {
			return err
		}
		w.version, w.st.updates = st.Version, st.Updates
		w.metrics.Version.Set(float64(w.version))
		return nil
	})
	if err != nil {
		return err
	}
	w.st.droppedSteps += int64(w.bufLen)
	w.dropBuffer()
	return nil
}
