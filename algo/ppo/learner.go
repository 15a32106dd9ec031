package ppo

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/distrl/distrl/api"
	"github.com/distrl/distrl/nn"
)

// Errors for errors.Is.
var (
	// ErrInvalidBatch: a batch given to Update (or GAE) is malformed or does
	// not fit the network.
	ErrInvalidBatch = errors.New("invalid sample batch")
	// ErrNonFinite: a gradient or loss was NaN or infinite, so the step was
	// not applied.
	ErrNonFinite = errors.New("non-finite gradient")
	// ErrInvalidState: a LearnerState does not fit the learner.
	ErrInvalidState = errors.New("invalid learner state")
)

// shuffleStream is the PCG stream of the minibatch shuffler ("ppo-shuf").
const shuffleStream = 0x70706f2d73687566

// Stats summarises one Update. The loss terms and diagnostics are means over
// every minibatch step taken.
type Stats struct {
	PolicyLoss float64 `msgpack:"policy_loss"`
	ValueLoss  float64 `msgpack:"value_loss"`
	Entropy    float64 `msgpack:"entropy"`
	// ApproxKL estimates KL(old‖new) as mean((r-1) - log r), the unbiased,
	// non-negative estimator CleanRL logs.
	ApproxKL float64 `msgpack:"approx_kl"`
	// ClipFrac is the fraction of rows whose ratio left [1-ε, 1+ε].
	ClipFrac float64 `msgpack:"clip_frac"`
	// ExplainedVariance is 1 - Var(R - V)/Var(R) of the values recorded in
	// the batches against the GAE returns: 1 is a perfect critic, 0 no
	// better than a constant, and NaN when the returns are constant.
	ExplainedVariance float64 `msgpack:"explained_variance"`
	// GradNorm is the mean gradient norm before clipping.
	GradNorm float64 `msgpack:"grad_norm"`
	// Samples is the number of steps in the update's batches.
	Samples int `msgpack:"samples"`
	// Epochs and Minibatches count the passes and gradient steps taken
	// (fewer epochs than configured if TargetKL stopped the update).
	Epochs      int `msgpack:"epochs"`
	Minibatches int `msgpack:"minibatches"`
	// LR is the learning rate the update used.
	LR float64 `msgpack:"lr"`
	// MidBatchTruncations counts Truncated steps that were not the last
	// of their batch and were treated as terminal (see GAE).
	MidBatchTruncations int `msgpack:"mid_batch_truncations"`
}

// LearnerState is a checkpoint of a Learner: restoring it into a learner
// built with the same network spec and Config resumes the same sequence of
// updates.
type LearnerState struct {
	Params   []float32 `msgpack:"params"`
	AdamM    []float32 `msgpack:"adam_m"`
	AdamV    []float32 `msgpack:"adam_v"`
	AdamStep int64     `msgpack:"adam_step"`
	// Updates is the number of completed updates; it drives the
	// learning-rate schedule.
	Updates int64 `msgpack:"updates"`
	// RNG is the minibatch shuffler's state (rand.PCG's binary form). A
	// state without it restores everything else and keeps the learner's
	// current shuffler.
	RNG []byte `msgpack:"rng,omitempty"`
}

// Learner trains an nn.ActorCritic with PPO. It is not safe for concurrent
// use.
type Learner struct {
	cfg      Config
	net      *nn.ActorCritic
	opt      *nn.Adam
	pcg      *rand.PCG
	rng      *rand.Rand
	updates  int64
	obsDim   int
	actDim   int
	gaussian bool

	// Buffers reused across updates, so that steady-state updates of a
	// similar size do not allocate (beyond what gonum's parallel GEMM does).
	all, mb samples
	perm    []int
	grad    []float32
	shards  []shard // one per goroutine of a minibatch (SetThreads)
	wg      sync.WaitGroup

	// eng, when set, is where the network trains (SetEngine): net's
	// parameters are then a copy, brought back after every update.
	eng nn.Engine

	// An engine that runs whole steps (stepEngine) is given every
	// minibatch of one or more epochs at once: their rows, where each
	// ends, and room for what each step reports.
	stepIdx    []int32
	stepBounds []int
	stepOut    []nn.SurrogateStep
}

// stepEngine is an engine that runs PPO's minibatch steps whole where the
// network is (nn/cuda's Engine): each minibatch's forward pass, the loss
// and its gradient, the clipping and Adam's step queue behind each other
// on the device, and what the steps report crosses back once, when they
// are done, instead of the outputs, their gradient and the norm crossing
// every minibatch with the loss computed here in between. Its loss is
// rowsLoss's (a categorical head's): surrogate.h in package nn/cuda, held
// to rowsLoss by this package's tests.
type stepEngine interface {
	// StageSurrogate keeps the loss's inputs of the rows Stage staged.
	StageSurrogate(rows nn.SurrogateRows) error
	// SurrogateSteps runs one step per minibatch (m: the staged rows
	// idx[bounds[m]:bounds[m+1]]) and reports each into out[m]; a step
	// whose norm or loss is not finite is not applied, nor any after it.
	// It returns how many steps it applied.
	SurrogateSteps(idx []int32, bounds []int, loss nn.SurrogateLoss, maxNorm, lr float32, out []nn.SurrogateStep) (int, error)
}

// NewLearner returns a learner that trains net in place with the given
// hyperparameters. The learner takes ownership of net: read its parameters
// through the learner (Params, State) between updates.
func NewLearner(net *nn.ActorCritic, cfg Config) (*Learner, error) {
	if net == nil {
		return nil, errors.New("ppo: new learner: nil network")
	}
	if err := cfg.Validate(); err != nil {
		return nil, err // already says "ppo: invalid config"
	}
	spec := net.Spec()
	opt := nn.NewAdam(net.NumParams(), float32(cfg.LR))
	opt.Eps = float32(cfg.AdamEps)
	pcg := rand.NewPCG(uint64(cfg.Seed), shuffleStream)
	return &Learner{
		cfg:      cfg,
		net:      net,
		opt:      opt,
		pcg:      pcg,
		rng:      rand.New(pcg),
		obsDim:   spec.ObsDim,
		actDim:   spec.ActionDim,
		gaussian: spec.Head == nn.Gaussian,
		grad:     make([]float32, net.NumParams()),
		shards:   make([]shard, 1),
	}, nil
}

// SetEngine moves the learner's training onto an engine opened by open
// (a GPU's: nn/cuda.EngineOpener) with the network's current parameters
// and the optimizer's state: forward and backward passes, clipping and
// Adam run there, the loss of each minibatch's outputs here; an update's
// observations cross once (Stage). The parameters and Adam's state come
// back after every update (Params, State see them); Restore sends them
// there. Threads no longer apply. Close releases the engine.
func (l *Learner) SetEngine(open nn.OpenEngine) error {
	if l.gaussian {
		return fmt.Errorf("ppo: %w", nn.ErrEngineHead)
	}
	e, err := open(l.net, l.opt)
	if err != nil {
		return fmt.Errorf("ppo: open engine: %w", err)
	}
	if l.eng != nil {
		_ = l.eng.Close()
	}
	l.eng = e
	return nil
}

// Close releases the engine, if any; the learner then trains on the CPU
// from the parameters it last brought back.
func (l *Learner) Close() error {
	if l.eng == nil {
		return nil
	}
	err := l.syncFromEngine()
	if cerr := l.eng.Close(); err == nil {
		err = cerr
	}
	l.eng = nil
	return err
}

// syncFromEngine copies the engine's parameters and Adam state into the
// learner's.
func (l *Learner) syncFromEngine() error {
	if err := l.eng.Params(l.net.Params()); err != nil {
		return fmt.Errorf("ppo: parameters from the engine: %w", err)
	}
	step, err := l.eng.AdamState(l.opt.M, l.opt.V)
	if err != nil {
		return fmt.Errorf("ppo: Adam state from the engine: %w", err)
	}
	l.opt.Step = step
	return nil
}

// Config returns the learner's hyperparameters.
func (l *Learner) Config() Config { return l.cfg }

// Net returns the network being trained (not a copy).
func (l *Learner) Net() *nn.ActorCritic { return l.net }

// Params returns the network's flat parameter vector itself, not a copy:
// it changes with every Update. Copy it before handing it to code that runs
// concurrently with the learner (policy.ActorCritic.SetParams copies).
func (l *Learner) Params() []float32 { return l.net.Params() }

// Updates returns the number of completed updates.
func (l *Learner) Updates() int64 { return l.updates }

// Reducer sums vectors across the members of a data-parallel group, in
// place: every member passes vectors of the same length and gets the same
// sum, bit for bit. *collective.Group is one.
type Reducer interface {
	AllreduceFloat32(ctx context.Context, x []float32) error
	AllreduceFloat64(ctx context.Context, x []float64) error
}

// gradTail is what a group member reduces after its gradient: its rows,
// then its loss terms times its rows (policy, value, entropy, approxKL,
// clipFrac, total).
const gradTail = 7

// Update runs one PPO update on the batches, which should have been
// collected by the current policy or a recent one (their LogProbs are the
// behaviour policy's). Every batch must have LogProbs and Values, actions
// of the network's kind, and observations of its width; empty batches are
// skipped. Batches are validated before anything changes, so an invalid
// batch leaves the learner untouched.
//
// If a gradient turns out non-finite, Update returns an error wrapping
// ErrNonFinite without applying that step; earlier steps of the same
// update have been applied. Take a State before the update to be able to
// roll back.
func (l *Learner) Update(batches []*api.SampleBatch) (Stats, error) {
	return l.UpdateGroup(context.Background(), batches, nil)
}

// UpdateGroup is Update as one member of a data-parallel group whose
// members hold the same state and each pass their part of the update's
// batches; r sums across the group (nil: a group of one, which is Update).
// Advantages are standardised over the whole group's batches, the number
// of minibatches is the group's, each member's minibatch m is its own
// part of the group's minibatch m, and the gradient applied is that of the
// loss's mean over the group's minibatch, so the members take the same
// steps, and the same steps as one learner given all the batches at once
// whose minibatches were those unions. Stats are the group's, explained
// variance included, but for Samples and MidBatchTruncations, which are
// this member's.
//
// An error of r (a member lost) leaves the learner part way through the
// update, like ErrNonFinite: roll back to a State taken before.
func (l *Learner) UpdateGroup(ctx context.Context, batches []*api.SampleBatch, r Reducer) (st Stats, err error) {
	if l.eng != nil {
		// Whatever happens, the host's copy is the engine's, so that
		// Params and State say where the learner is (three vectors of
		// NumParams a PPO update: a fraction of a millisecond).
		defer func() {
			if serr := l.syncFromEngine(); serr != nil && err == nil {
				err = fmt.Errorf("ppo: update: %w", serr)
			}
		}()
	}
	n := 0
	for i, b := range batches {
		if err := l.checkBatch(b); err != nil {
			return st, fmt.Errorf("ppo: update: batch %d: %w", i, err)
		}
		n += b.Len()
	}
	if n == 0 {
		return st, fmt.Errorf("ppo: update: %w: no samples", ErrInvalidBatch)
	}
	st.Samples = n
	mid, err := l.flatten(batches, n)
	if err != nil {
		return st, fmt.Errorf("ppo: update: %w", err)
	}
	st.MidBatchTruncations = mid
	total, ev, err := l.standardize(ctx, r)
	if err != nil {
		return st, fmt.Errorf("ppo: update: %w", err)
	}
	st.ExplainedVariance = ev
	if err := l.stage(); err != nil {
		return st, fmt.Errorf("ppo: update: %w", err)
	}

	st.LR = l.cfg.lrAt(l.updates)
	l.opt.LR = float32(st.LR)
	l.perm = grow(l.perm, n)
	for i := range l.perm {
		l.perm[i] = i
	}
	// ceil(total/size) minibatches, whose sizes differ by at most one in a
	// group of one.
	k := (total + l.cfg.MinibatchSize - 1) / l.cfg.MinibatchSize
	// A group's members reduce every minibatch's gradient here, so they
	// take their steps one by one.
	steps, _ := l.eng.(stepEngine)
	if r != nil {
		steps = nil
	}
	if steps != nil {
		if err := l.stageSurrogate(steps); err != nil {
			return st, fmt.Errorf("ppo: update: %w", err)
		}
	}
	for st.Epochs < l.cfg.Epochs {
		var epochKL float64
		if steps != nil {
			epochKL, err = l.engineEpochs(steps, &st, k)
		} else {
			epochKL, err = l.epoch(ctx, r, &st, k)
		}
		if err != nil {
			return st, err
		}
		if l.cfg.TargetKL > 0 && epochKL/float64(k) > l.cfg.TargetKL {
			break
		}
	}
	inv := 1 / float64(st.Minibatches)
	st.PolicyLoss *= inv
	st.ValueLoss *= inv
	st.Entropy *= inv
	st.ApproxKL *= inv
	st.ClipFrac *= inv
	st.GradNorm *= inv
	l.updates++
	return st, nil
}

// epoch runs one epoch of k minibatch steps, one after the other, adds
// them to st and returns the sum of their approximate KLs.
func (l *Learner) epoch(ctx context.Context, r Reducer, st *Stats, k int) (epochKL float64, err error) {
	n := l.all.n
	np := l.net.NumParams()
	if r != nil {
		l.grad = grow(l.grad, np+gradTail)
	}
	grad := l.grad[:np]
	maxNorm := float32(l.cfg.MaxGradNorm)
	l.rng.Shuffle(n, func(i, j int) { l.perm[i], l.perm[j] = l.perm[j], l.perm[i] })
	for m := range k {
		idx := l.perm[m*n/k : (m+1)*n/k]
		var t lossTerms
		if len(idx) > 0 {
			l.mb.gather(&l.all, idx, l.obsDim, l.actDim, l.gaussian, l.eng == nil)
			if t, err = l.lossAndGrad(&l.mb, grad); err != nil {
				return 0, fmt.Errorf("ppo: update: %w", err)
			}
		} else {
			clear(grad) // a member with fewer rows than minibatches
		}
		if r != nil {
			if t, err = l.reduceGroupGrad(ctx, r, t, len(idx), grad); err != nil {
				return 0, fmt.Errorf("ppo: update: epoch %d, minibatch %d: %w", st.Epochs, m, err)
			}
		}
		norm, err := l.clip(grad, maxNorm)
		if err != nil {
			return 0, fmt.Errorf("ppo: update: %w", err)
		}
		if err := checkStep(st, m, t, norm); err != nil {
			return 0, err
		}
		if err := l.step(grad); err != nil {
			return 0, fmt.Errorf("ppo: update: %w", err)
		}
		st.add(t, norm)
		epochKL += t.approxKL
	}
	st.Epochs++
	return epochKL, nil
}

// engineEpochs runs epochs of k minibatch steps on an engine that takes
// them whole: the next epoch alone where TargetKL may stop the update
// after it, every epoch left at once where it cannot (their shuffles are
// drawn first, the same draws as one epoch at a time). It adds the steps
// to st and returns the last epoch's sum of approximate KLs.
func (l *Learner) engineEpochs(e stepEngine, st *Stats, k int) (lastKL float64, err error) {
	n := l.all.n
	epochs := 1
	if l.cfg.TargetKL <= 0 {
		epochs = l.cfg.Epochs - st.Epochs
	}
	l.stepIdx = l.stepIdx[:0]
	l.stepBounds = append(l.stepBounds[:0], 0)
	for range epochs {
		l.rng.Shuffle(n, func(i, j int) { l.perm[i], l.perm[j] = l.perm[j], l.perm[i] })
		for m := range k {
			for _, j := range l.perm[m*n/k : (m+1)*n/k] {
				l.stepIdx = append(l.stepIdx, int32(j))
			}
			l.stepBounds = append(l.stepBounds, len(l.stepIdx))
		}
	}
	l.stepOut = slices.Grow(l.stepOut[:0], epochs*k)[:epochs*k]
	loss := nn.SurrogateLoss{ClipEps: l.cfg.ClipEps, ValueCoef: l.cfg.ValueCoef, EntropyCoef: l.cfg.EntropyCoef, ClipValue: l.cfg.ClipValueLoss}
	applied, err := e.SurrogateSteps(l.stepIdx, l.stepBounds, loss, float32(l.cfg.MaxGradNorm), l.opt.LR, l.stepOut)
	if err != nil {
		return 0, fmt.Errorf("ppo: update: %w", err)
	}
	for s, out := range l.stepOut {
		m := s % k
		t := lossTerms{policy: out.Policy, value: out.Value, entropy: out.Entropy, approxKL: out.ApproxKL, clipFrac: out.ClipFrac}
		l.means(&t, l.stepBounds[s+1]-l.stepBounds[s])
		if s == applied {
			if err := checkStep(st, m, t, out.Norm); err != nil {
				return 0, err
			}
			// The engine stopped at a step this side finds finite: its
			// float32 norm or its loss overflowed where ours did not.
			return 0, fmt.Errorf("ppo: update: epoch %d, minibatch %d: %w (on the engine; here norm %v, loss %v)",
				st.Epochs, m, ErrNonFinite, out.Norm, t.total)
		}
		st.add(t, out.Norm)
		if m == 0 {
			lastKL = 0
		}
		lastKL += t.approxKL
		if m == k-1 {
			st.Epochs++
		}
	}
	return lastKL, nil
}

// checkStep is the error of step m of the current epoch if its gradient's
// norm or its loss is not finite, so that it must not be applied.
func checkStep(st *Stats, m int, t lossTerms, norm float32) error {
	if f := float64(norm); math.IsNaN(f) || math.IsInf(f, 0) || math.IsNaN(t.total) {
		return fmt.Errorf("ppo: update: epoch %d, minibatch %d: %w (norm %v, loss %v)", st.Epochs, m, ErrNonFinite, norm, t.total)
	}
	return nil
}

// add counts a step taken into the update's sums.
func (st *Stats) add(t lossTerms, norm float32) {
	st.PolicyLoss += t.policy
	st.ValueLoss += t.value
	st.Entropy += t.entropy
	st.ApproxKL += t.approxKL
	st.ClipFrac += t.clipFrac
	st.GradNorm += float64(norm)
	st.Minibatches++
}

// stageSurrogate sends the update's rows' loss inputs to an engine that
// runs whole steps, once for all its epochs, after their observations.
func (l *Learner) stageSurrogate(e stepEngine) error {
	n := l.all.n
	a := &l.all
	rows := nn.SurrogateRows{Actions: a.actions[:n], OldLogp: a.oldLogp[:n], OldValues: a.oldValues[:n], Adv: a.adv[:n], Returns: a.returns[:n]}
	if err := e.StageSurrogate(rows); err != nil {
		return fmt.Errorf("loss inputs to the engine: %w", err)
	}
	return nil
}

// stage sends the update's observations to the engine, if there is one,
// once for all its epochs.
func (l *Learner) stage() error {
	if l.eng == nil {
		return nil
	}
	if err := l.eng.Stage(l.all.obs[:l.all.n*l.obsDim], l.all.n); err != nil {
		return fmt.Errorf("observations to the engine: %w", err)
	}
	return nil
}

// reduceGroupGrad is reduceGrad of the gradient wherever it is: on an
// engine it crosses to the host for the group's sum and back.
func (l *Learner) reduceGroupGrad(ctx context.Context, r Reducer, t lossTerms, rows int, grad []float32) (lossTerms, error) {
	if l.eng == nil {
		return l.reduceGrad(ctx, r, t, rows)
	}
	if rows > 0 { // a member without rows cleared grad, and has no engine pass
		if err := l.eng.Grad(grad); err != nil {
			return t, err
		}
	}
	t, err := l.reduceGrad(ctx, r, t, rows)
	if err != nil {
		return t, err
	}
	return t, l.eng.SetGrad(grad)
}

// clip is nn.ClipGradNorm of the gradient, on the engine if there is one.
func (l *Learner) clip(grad []float32, maxNorm float32) (float32, error) {
	if l.eng != nil {
		return l.eng.ClipGradNorm(maxNorm)
	}
	return nn.ClipGradNorm(grad, maxNorm), nil
}

// step applies Adam to the (clipped) gradient, on the engine if there is
// one.
func (l *Learner) step(grad []float32) error {
	if l.eng != nil {
		return l.eng.Step(l.opt.LR)
	}
	return l.opt.Update(l.net.Params(), grad)
}

// reduceGrad turns this member's gradient of the mean loss over its rows
// (l.grad[:NumParams]) and its terms t into the group's: each member
// weighs its part by its rows, the group sums, and the sums are divided by
// the group's rows.
func (l *Learner) reduceGrad(ctx context.Context, r Reducer, t lossTerms, rows int) (lossTerms, error) {
	np := l.net.NumParams()
	buf := l.grad[:np+gradTail]
	w := float32(rows)
	for i := range np {
		buf[i] *= w
	}
	tail := buf[np:]
	tail[0] = w
	for i, v := range []float64{t.policy, t.value, t.entropy, t.approxKL, t.clipFrac, t.total} {
		tail[1+i] = float32(v * float64(rows))
	}
	if err := r.AllreduceFloat32(ctx, buf); err != nil {
		return t, err
	}
	inv := 1 / tail[0]
	for i := range np {
		buf[i] *= inv
	}
	f := func(i int) float64 { return float64(tail[1+i]) / float64(tail[0]) }
	return lossTerms{policy: f(0), value: f(1), entropy: f(2), approxKL: f(3), clipFrac: f(4), total: f(5)}, nil
}

// standardize computes the explained variance of the recorded values
// against the GAE returns and, if configured, standardises the advantages
// to zero mean and unit (population) variance, over the group's rows when
// r is not nil. It returns the group's number of rows.
func (l *Learner) standardize(ctx context.Context, r Reducer) (int, float64, error) {
	adv, y, pred := l.all.adv, l.all.returns, l.all.oldValues
	// Two passes, each summed over the group: the means, then the squared
	// deviations from them.
	var first [4]float64 // rows, Σadv, Σy, Σ(y - pred)
	first[0] = float64(len(y))
	for i := range y {
		first[1] += float64(adv[i])
		first[2] += float64(y[i])
		first[3] += float64(y[i]) - float64(pred[i])
	}
	if r != nil {
		if err := r.AllreduceFloat64(ctx, first[:]); err != nil {
			return 0, 0, err
		}
	}
	n := first[0]
	ma, my, mr := first[1]/n, first[2]/n, first[3]/n
	var second [3]float64 // Σ(adv - ma)², Σ(y - my)², Σ(y - pred - mr)²
	for i := range y {
		da := float64(adv[i]) - ma
		dy := float64(y[i]) - my
		dr := float64(y[i]) - float64(pred[i]) - mr
		second[0] += da * da
		second[1] += dy * dy
		second[2] += dr * dr
	}
	if r != nil {
		if err := r.AllreduceFloat64(ctx, second[:]); err != nil {
			return 0, 0, err
		}
	}
	ev := math.NaN() // constant returns
	if second[1] != 0 {
		ev = 1 - second[2]/second[1]
	}
	if l.cfg.NormalizeAdvantages {
		// Population std (numpy's default). CleanRL uses torch's unbiased
		// std; the factor sqrt(n/(n-1)) between them is negligible at
		// PPO's batch sizes. The 1e-8 keeps constant advantages finite
		// (they become zeros).
		inv := 1 / (math.Sqrt(second[0]/n) + 1e-8)
		for i, v := range adv {
			adv[i] = float32((float64(v) - ma) * inv)
		}
	}
	return int(n), ev, nil
}

// checkBatch verifies what Update relies on, so that a bad batch fails
// here with a clear message instead of as NaN several steps later.
func (l *Learner) checkBatch(b *api.SampleBatch) error {
	if b == nil {
		return fmt.Errorf("%w: nil", ErrInvalidBatch)
	}
	if err := b.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidBatch, err)
	}
	n := b.Len()
	if n == 0 {
		return nil
	}
	// One step's observation is whatever follows the time dimension: a
	// vector, or an image for a conv network, which takes it flat.
	if d := len(b.Obs.Data) / n; d != l.obsDim {
		return fmt.Errorf("%w: observations of shape %v have %d values a step, the network takes %d",
			ErrInvalidBatch, b.Obs.Shape[1:], d, l.obsDim)
	}
	if len(b.LogProbs.Data) != n || len(b.Values.Data) != n {
		return fmt.Errorf("%w: PPO needs the behaviour policy's LogProbs and Values for every step", ErrInvalidBatch)
	}
	if l.gaussian {
		if b.ContActions.IsZero() || b.ContActions.Shape[1] != l.actDim {
			return fmt.Errorf("%w: a Gaussian head needs continuous actions of %d values, got shape %v",
				ErrInvalidBatch, l.actDim, b.ContActions.Shape)
		}
		if i := api.FirstNonFinite(b.ContActions.Data); i >= 0 {
			return fmt.Errorf("%w: continuous action value %d is %v", ErrInvalidBatch, i, b.ContActions.Data[i])
		}
	} else {
		if b.Actions.IsZero() {
			return fmt.Errorf("%w: a categorical head needs discrete actions", ErrInvalidBatch)
		}
		for t, a := range b.Actions.Data {
			if a < 0 || int(a) >= l.actDim {
				return fmt.Errorf("%w: step %d: action %d outside [0, %d)", ErrInvalidBatch, t, a, l.actDim)
			}
		}
	}
	obs := b.Obs.Data
	if b.Obs.Binary() {
		obs = nil // decoded from bits: every value 0 or 1 (a MinAtar update's millions of them)
	}
	for _, c := range []struct {
		name string
		data []float32
	}{{"observation", obs}, {"reward", b.Rewards.Data}, {"log-probability", b.LogProbs.Data}, {"value", b.Values.Data}} {
		if i := api.FirstNonFinite(c.data); i >= 0 {
			return fmt.Errorf("%w: %s %d is %v", ErrInvalidBatch, c.name, i, c.data[i])
		}
	}
	return nil
}

// flatten copies the batches into l.all and fills in advantages and
// returns, batch by batch since each has its own bootstrap value.
func (l *Learner) flatten(batches []*api.SampleBatch, n int) (midTruncations int, err error) {
	l.all.resize(n, l.obsDim, l.actDim, l.gaussian)
	off := 0
	for i, b := range batches {
		t := b.Len()
		if t == 0 {
			continue
		}
		end := off + t
		copy(l.all.obs[off*l.obsDim:end*l.obsDim], b.Obs.Data)
		if l.gaussian {
			copy(l.all.cont[off*l.actDim:end*l.actDim], b.ContActions.Data)
		} else {
			copy(l.all.actions[off:end], b.Actions.Data)
		}
		copy(l.all.oldLogp[off:end], b.LogProbs.Data)
		copy(l.all.oldValues[off:end], b.Values.Data)
		mid, err := GAE(b, l.cfg.Gamma, l.cfg.Lambda, l.all.adv[off:end], l.all.returns[off:end])
		if err != nil {
			return 0, fmt.Errorf("batch %d: %w", i, err)
		}
		midTruncations += mid
		off = end
	}
	return midTruncations, nil
}

// State returns a copy of everything needed to resume training.
func (l *Learner) State() LearnerState {
	// PCG's MarshalBinary cannot fail.
	rng, _ := l.pcg.MarshalBinary()
	return LearnerState{
		Params:   slices.Clone(l.net.Params()),
		AdamM:    slices.Clone(l.opt.M),
		AdamV:    slices.Clone(l.opt.V),
		AdamStep: l.opt.Step,
		Updates:  l.updates,
		RNG:      rng,
	}
}

// Restore replaces the learner's state by a copy of s. It checks s
// completely first (lengths, finite parameters, non-negative second
// moments and counters, a decodable RNG), so a rejected state leaves the
// learner unchanged.
func (l *Learner) Restore(s LearnerState) error {
	np := l.net.NumParams()
	if len(s.Params) != np || len(s.AdamM) != np || len(s.AdamV) != np {
		return fmt.Errorf("ppo: restore: %w: %d params, %d and %d Adam moments for a network of %d parameters",
			ErrInvalidState, len(s.Params), len(s.AdamM), len(s.AdamV), np)
	}
	if s.AdamStep < 0 || s.Updates < 0 {
		return fmt.Errorf("ppo: restore: %w: negative counter (Adam step %d, updates %d)", ErrInvalidState, s.AdamStep, s.Updates)
	}
	for _, c := range []struct {
		name string
		data []float32
	}{{"parameter", s.Params}, {"Adam first moment", s.AdamM}, {"Adam second moment", s.AdamV}} {
		if i := api.FirstNonFinite(c.data); i >= 0 {
			return fmt.Errorf("ppo: restore: %w: %s %d is %v", ErrInvalidState, c.name, i, c.data[i])
		}
	}
	for i, v := range s.AdamV {
		if v < 0 {
			return fmt.Errorf("ppo: restore: %w: Adam second moment %d is negative (%v)", ErrInvalidState, i, v)
		}
	}
	var pcg rand.PCG
	if len(s.RNG) > 0 {
		if err := pcg.UnmarshalBinary(s.RNG); err != nil {
			return fmt.Errorf("ppo: restore: %w: rng: %w", ErrInvalidState, err)
		}
	}
	if err := l.net.SetParams(s.Params); err != nil { // cannot fail: length checked
		return fmt.Errorf("ppo: restore: %w", err)
	}
	copy(l.opt.M, s.AdamM)
	copy(l.opt.V, s.AdamV)
	l.opt.Step = s.AdamStep
	l.updates = s.Updates
	if len(s.RNG) > 0 {
		*l.pcg = pcg
	}
	if l.eng != nil {
		if err := l.eng.SetParams(s.Params); err != nil {
			return fmt.Errorf("ppo: restore: parameters to the engine: %w", err)
		}
		if err := l.eng.SetAdamState(s.AdamM, s.AdamV, s.AdamStep); err != nil {
			return fmt.Errorf("ppo: restore: Adam state to the engine: %w", err)
		}
	}
	return nil
}
