package dqn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/distrl/distrl/nn"
)

// Config holds DQN's hyperparameters; start from DefaultConfig.
type Config struct {
	LR float64 `msgpack:"lr"`
	// HuberDelta is where the loss turns from quadratic to linear.
	HuberDelta float64 `msgpack:"huber_delta"`
	// MaxGradNorm clips the gradient norm (0: no clipping).
	MaxGradNorm float64 `msgpack:"max_grad_norm"`
	// TargetUpdateEvery copies the online network into the target every
	// so many updates; 0 uses Polyak averaging with Tau after every update.
	TargetUpdateEvery int     `msgpack:"target_update_every"`
	Tau               float64 `msgpack:"tau"`
	Double            bool    `msgpack:"double"`
	Dueling           bool    `msgpack:"dueling"`
}

// DefaultConfig: double DQN, lr 5e-4, Huber delta 1, clip 10, target
// copied every 500 updates.
func DefaultConfig() Config {
	return Config{LR: 5e-4, HuberDelta: 1, MaxGradNorm: 10, TargetUpdateEvery: 500, Double: true}
}

// ErrInvalidConfig is wrapped by Validate's errors.
var ErrInvalidConfig = errors.New("dqn: invalid config")

// Validate names the first field out of range.
func (c Config) Validate() error {
	switch {
	case !(c.LR > 0) || math.IsInf(c.LR, 0):
		return fmt.Errorf("%w: lr %v: want > 0", ErrInvalidConfig, c.LR)
	case !(c.HuberDelta > 0) || math.IsInf(c.HuberDelta, 0):
		return fmt.Errorf("%w: huber_delta %v: want > 0", ErrInvalidConfig, c.HuberDelta)
	case !(c.MaxGradNorm >= 0):
		return fmt.Errorf("%w: max_grad_norm %v: want >= 0", ErrInvalidConfig, c.MaxGradNorm)
	case c.TargetUpdateEvery < 0:
		return fmt.Errorf("%w: target_update_every %d: want >= 0", ErrInvalidConfig, c.TargetUpdateEvery)
	case c.TargetUpdateEvery == 0 && !(c.Tau > 0 && c.Tau <= 1):
		return fmt.Errorf("%w: tau %v: want 0 < tau <= 1 when target_update_every is 0", ErrInvalidConfig, c.Tau)
	}
	return nil
}

// Batch is a training batch of B transitions.
type Batch struct {
	Obs       []float32 // [B*ObsDim]
	Actions   []int32   // [B]
	Rewards   []float32 // [B] discounted n-step sums
	Discounts []float32 // [B] gamma^m, 0 after termination
	NextObs   []float32 // [B*ObsDim]
	Weights   []float32 // [B] importance weights; nil: all 1
}

// Len is B.
func (b *Batch) Len() int { return len(b.Actions) }

// Stats are one update's figures.
type Stats struct {
	Loss     float64
	MeanQ    float64
	MeanTD   float64 // mean |TD error|
	GradNorm float64
}

// Learner holds the online and target networks and the optimizer.
type Learner struct {
	cfg            Config
	spec           nn.Spec
	online, target *nn.ActorCritic
	opt            *nn.Adam
	updates        int64

	ws, wsNext, wsTgt *nn.Workspace
	out, outNext, tgt nn.Output
	grad              []float32
	dOut              nn.Output
	q, qNext, qTgt    []float32

	// eng and tgtEng, when set (SetEngine), are where the online and
	// target networks run; online's and target's parameters are then the
	// host's copies, online's brought back by Sync (stale: not yet).
	eng, tgtEng nn.Engine
	stale       bool
	// whole is eng where it takes whole updates (updateEngine); it keeps
	// a copy of the target's parameters beside the online network's.
	whole   updateEngine
	weights []float32 // all 1, for a batch without importance weights
}

// updateEngine is an engine that runs a DQN update whole where the
// networks are (nn/cuda's Engine): the three forward passes, the loss and
// its gradient, the backward pass, the clipping and Adam's step queue
// behind each other, and the stats and priorities come back once, instead
// of the outputs, their gradient and the norm crossing with the loss
// computed here in between. Its loss is lossAndGrad's (nn/cuda's
// dqnloss.h), held to it by this package's tests.
type updateEngine interface {
	// SetTarget keeps the target network's parameters on the engine.
	SetTarget(params []float32) error
	// DQNUpdate makes the update, its |TD errors| into td, unless the
	// loss or the norm is not finite (applied false).
	DQNUpdate(b nn.DQNBatch, loss nn.DQNLoss, maxNorm, lr float32, td []float64) (st nn.DQNStep, applied bool, err error)
}

// NewLearner builds the networks for spec (a categorical head; the trunk
// is shared when cfg.Dueling) seeded with seed.
func NewLearner(spec nn.Spec, cfg Config, seed int64) (*Learner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if spec.Head != nn.Categorical {
		return nil, fmt.Errorf("%w: DQN needs a categorical head (discrete actions), got %q", ErrInvalidConfig, spec.Head)
	}
	if spec.ActionMask != nil {
		// A dueling head's mean advantage would take in the masked
		// actions' logits.
		return nil, fmt.Errorf("%w: DQN does not take action masks (the environment marks its available actions; use PPO)", ErrInvalidConfig)
	}
	spec.SharedTrunk = spec.SharedTrunk || cfg.Dueling
	online, err := nn.NewActorCritic(spec, seed)
	if err != nil {
		return nil, fmt.Errorf("dqn: %w", err)
	}
	return &Learner{cfg: cfg, spec: spec, online: online, target: online.Clone(),
		opt: nn.NewAdam(online.NumParams(), float32(cfg.LR)), grad: make([]float32, online.NumParams(), online.NumParams()+groupTail),
		ws: nn.NewWorkspace(), wsNext: nn.NewWorkspace(), wsTgt: nn.NewWorkspace()}, nil
}

// Online is the online network (its parameters are what actors act with;
// on an engine, as of the last Sync).
func (l *Learner) Online() *nn.ActorCritic { return l.online }

// Spec is the networks' spec.
func (l *Learner) Spec() nn.Spec { return l.spec }

// Updates counts the updates made.
func (l *Learner) Updates() int64 { return l.updates }

// SetEngine moves the learner's networks onto engines opened by open (a
// GPU's: nn/cuda.EngineOpener), the online network's with the optimizer's
// state: forward and backward passes, clipping and Adam run there, the
// loss here. The online parameters come back when asked for (Sync; Online
// sees them then), the target's go there when they change, Adam's state
// comes back for State; Restore sends everything there. Close releases
// them.
func (l *Learner) SetEngine(open nn.OpenEngine) error {
	eng, err := open(l.online, l.opt)
	if err != nil {
		return fmt.Errorf("dqn: open engine: %w", err)
	}
	// The target never steps; an engine is opened with an optimizer of its
	// size all the same.
	tgt, err := open(l.target, nn.NewAdam(l.target.NumParams(), 0))
	if err != nil {
		_ = eng.Close()
		return fmt.Errorf("dqn: open the target's engine: %w", err)
	}
	if err := l.Close(); err != nil {
		_, _ = eng.Close(), tgt.Close()
		return err
	}
	l.eng, l.tgtEng = eng, tgt
	if w, ok := eng.(updateEngine); ok {
		if err := w.SetTarget(l.target.Params()); err != nil {
			_ = l.Close()
			return fmt.Errorf("dqn: target parameters to the engine: %w", err)
		}
		l.whole = w
	}
	return nil
}

// Sync brings the online parameters back from the engine, where the
// updates since the last Sync left them, so that Online has them: an
// update on an engine leaves the host's copy behind (a GPU learner makes
// hundreds of updates a second, and they are published every few tens).
// Without an engine it does nothing.
func (l *Learner) Sync() error {
	if l.eng == nil || !l.stale {
		return nil
	}
	if err := l.eng.Params(l.online.Params()); err != nil {
		return fmt.Errorf("dqn: parameters from the engine: %w", err)
	}
	l.stale = false
	return nil
}

// Close releases the engines, if any; the learner then trains on the CPU
// from the parameters and Adam state it brings back first.
func (l *Learner) Close() error {
	if l.eng == nil {
		return nil
	}
	err := l.Sync()
	step, aerr := l.eng.AdamState(l.opt.M, l.opt.V)
	err = cmp.Or(err, aerr)
	if err == nil {
		l.opt.Step = step
	}
	for _, e := range []nn.Engine{l.eng, l.tgtEng} {
		if cerr := e.Close(); err == nil {
			err = cerr
		}
	}
	l.eng, l.tgtEng, l.whole = nil, nil, nil
	if err != nil {
		return fmt.Errorf("dqn: close engines: %w", err)
	}
	return nil
}

// QValues writes Q(s, ·) of the network m for batch observations into q
// ([batch*ActionDim]), combining a dueling head; ws and out are scratch.
func QValues(m *nn.ActorCritic, dueling bool, obs []float32, batch int, ws *nn.Workspace, out *nn.Output, q []float32) ([]float32, error) {
	if err := m.Forward(obs, batch, ws, out); err != nil {
		return q, err
	}
	return combineQ(out, dueling, m.Spec().ActionDim, batch, q), nil
}

// engineQ is QValues on an engine, its activations kept in slot.
func engineQ(e nn.Engine, slot int, dueling bool, actions int, obs []float32, batch int, out *nn.Output, q []float32) ([]float32, error) {
	if err := e.Forward(slot, obs, batch, out); err != nil {
		return q, err
	}
	return combineQ(out, dueling, actions, batch, q), nil
}

// combineQ is Q of a forward pass's outputs: the logits, or for a dueling
// head V + A - mean(A).
func combineQ(out *nn.Output, dueling bool, a, batch int, q []float32) []float32 {
	q = grow(q, batch*a)
	copy(q, out.Logits)
	if dueling {
		for b := range batch {
			row := q[b*a : (b+1)*a]
			mean := float32(0)
			for _, x := range row {
				mean += x
			}
			mean /= float32(a)
			for i := range row {
				row[i] += out.Values[b] - mean
			}
		}
	}
	return q
}

func grow(s []float32, n int) []float32 {
	if cap(s) < n {
		return make([]float32, n)
	}
	return s[:n]
}

// Argmax is the greedy action of a row of Q-values (the first of ties).
func Argmax(q []float32) int {
	best := 0
	for i, x := range q {
		if x > q[best] {
			best = i
		}
	}
	return best
}

// EpsilonGreedy is a random action with probability eps, else Argmax(q).
func EpsilonGreedy(r *rand.Rand, q []float32, eps float64) int {
	if r.Float64() < eps {
		return r.IntN(len(q))
	}
	return Argmax(q)
}

// ApeXEpsilon is actor i's epsilon of n actors: 0.4^(1 + 7 i/(n-1)) (one
// actor: 0.4).
func ApeXEpsilon(i, n int) float64 {
	if n <= 1 {
		return 0.4
	}
	return math.Pow(0.4, 1+7*float64(i)/float64(n-1))
}

// Update makes one gradient step on b and returns the stats and every
// sample's |TD error| (its new priority), in b's order, into td.
func (l *Learner) Update(b *Batch, td []float64) (Stats, []float64, error) {
	return l.UpdateGroup(context.Background(), b, td, nil)
}

// Reducer sums float32 vectors across the members of a data-parallel
// group, in place: every member passes the same length and gets the same
// sum, bit for bit. *collective.Group is one.
type Reducer interface {
	AllreduceFloat32(ctx context.Context, x []float32) error
}

// groupTail is what a member reduces after its gradient: its rows, then
// its loss, mean Q and mean |TD| times its rows.
const groupTail = 4

// ErrGroupSkipped: a member of the group could not use its batch (a
// non-finite loss) or every member's batch was empty, so no member took
// the step.
var ErrGroupSkipped = errors.New("dqn: the group skipped the step")

// UpdateGroup is Update as one member of a data-parallel group whose
// members hold the same state and each pass their part of the step's
// samples (r sums across the group; nil is Update): the step taken is the
// gradient of the weighted loss's mean over every member's samples, so
// the members stay identical, and identical to one learner given all the
// samples. Stats are the group's; td is this member's samples'. A member
// with an empty batch still takes part (and the step); one whose loss is
// not finite makes every member skip the step (ErrGroupSkipped). An error
// of r leaves the learner as it was.
func (l *Learner) UpdateGroup(ctx context.Context, b *Batch, td []float64, r Reducer) (Stats, []float64, error) {
	if r == nil && l.whole != nil {
		return l.wholeUpdate(b, td)
	}
	var st Stats
	var err error
	if r == nil || b.Len() > 0 {
		st, td, err = l.lossAndGrad(b, td, true)
	}
	grad := l.grad[:l.online.NumParams()]
	if r == nil {
		if err != nil {
			return st, td, err
		}
	} else {
		if l.eng != nil && err == nil && b.Len() > 0 {
			if gerr := l.eng.Grad(grad); gerr != nil {
				return st, td, fmt.Errorf("dqn: gradient from the engine: %w", gerr)
			}
		}
		if st, err = l.reduceGrad(ctx, r, st, b.Len(), err); err != nil {
			return st, td, err
		}
		if l.eng != nil {
			if err := l.eng.SetGrad(grad); err != nil {
				return st, td, fmt.Errorf("dqn: gradient to the engine: %w", err)
			}
		}
	}
	norm, err := l.clip(grad)
	if err != nil {
		return st, td, err
	}
	if st.GradNorm = float64(norm); !finite(st.GradNorm) {
		return st, td, errNotFinite("gradient norm", st.GradNorm)
	}
	if err := l.step(grad); err != nil {
		return st, td, fmt.Errorf("dqn: %w", err)
	}
	l.updates++
	return st, td, l.moveTarget()
}

// wholeUpdate is Update on an engine that takes whole updates.
func (l *Learner) wholeUpdate(b *Batch, td []float64) (Stats, []float64, error) {
	if err := l.checkBatch(b); err != nil {
		return Stats{}, td, err
	}
	n := b.Len()
	w := b.Weights
	if w == nil {
		for len(l.weights) < n {
			l.weights = append(l.weights, 1)
		}
		w = l.weights[:n]
	}
	td = slices.Grow(td[:0], n)[:n]
	loss := nn.DQNLoss{HuberDelta: l.cfg.HuberDelta, Double: l.cfg.Double, Dueling: l.cfg.Dueling}
	out, applied, err := l.whole.DQNUpdate(nn.DQNBatch{Obs: b.Obs, NextObs: b.NextObs, Actions: b.Actions, Rewards: b.Rewards,
		Discounts: b.Discounts, Weights: w}, loss, float32(l.cfg.MaxGradNorm), l.opt.LR, td)
	if err != nil {
		return Stats{}, td[:0], fmt.Errorf("dqn: %w", err)
	}
	st := Stats{Loss: out.Loss, MeanQ: out.MeanQ, MeanTD: out.MeanTD}
	// The checks of lossAndGrad and UpdateGroup, in their order; the
	// engine skipped the step where they fail.
	if !finite(st.Loss) {
		return st, td, errNotFinite("loss", st.Loss)
	}
	if st.GradNorm = float64(out.Norm); !finite(st.GradNorm) {
		return st, td, errNotFinite("gradient norm", st.GradNorm)
	}
	if !applied {
		return st, td, fmt.Errorf("dqn: the engine did not take the step (loss %v, gradient norm %v)", st.Loss, st.GradNorm)
	}
	l.stale = true
	l.updates++
	return st, td, l.moveTarget()
}

// clip is nn.ClipGradNorm of the gradient, on the engine if there is one.
func (l *Learner) clip(grad []float32) (float32, error) {
	if l.eng == nil {
		return nn.ClipGradNorm(grad, float32(l.cfg.MaxGradNorm)), nil
	}
	norm, err := l.eng.ClipGradNorm(float32(l.cfg.MaxGradNorm))
	if err != nil {
		return norm, fmt.Errorf("dqn: %w", err)
	}
	return norm, nil
}

// step applies Adam to the (clipped) gradient, on the engine if there is
// one, whose online parameters the host's copy then lags (Sync).
func (l *Learner) step(grad []float32) error {
	if l.eng == nil {
		return l.opt.Update(l.online.Params(), grad)
	}
	if err := l.eng.Step(l.opt.LR); err != nil {
		return err
	}
	l.stale = true
	return nil
}

// moveTarget moves the target network towards the online one when it is
// due (updateTarget), from the online parameters brought back first and
// into the target's engine after, if there are engines.
func (l *Learner) moveTarget() error {
	if !l.targetDue() {
		return nil
	}
	if err := l.Sync(); err != nil {
		return err
	}
	l.updateTarget()
	return l.targetToEngines()
}

// targetToEngines sends the target's parameters where the engines keep
// them: the target's engine, and the online engine's copy where it takes
// whole updates.
func (l *Learner) targetToEngines() error {
	if l.tgtEng == nil {
		return nil
	}
	err := l.tgtEng.SetParams(l.target.Params())
	if err == nil && l.whole != nil {
		err = l.whole.SetTarget(l.target.Params())
	}
	if err != nil {
		return fmt.Errorf("dqn: target parameters to the engine: %w", err)
	}
	return nil
}

// reduceGrad turns this member's gradient of the mean loss over its rows
// (l.grad) and its stats into the group's: each member weighs its part by
// its rows, the group sums, the sums are divided by the group's rows. A
// member whose own loss failed (lossErr) sends a NaN loss, so that every
// member skips the step.
func (l *Learner) reduceGrad(ctx context.Context, r Reducer, st Stats, rows int, lossErr error) (Stats, error) {
	np := l.online.NumParams()
	buf := l.grad[:np+groupTail] // NewLearner left room for the tail
	tail := buf[np:]
	if lossErr != nil || rows == 0 {
		clear(buf[:np])
		rows = 0
	}
	w := float32(rows)
	for i := range np {
		buf[i] *= w
	}
	tail[0] = w
	tail[1] = float32(st.Loss * float64(rows))
	tail[2] = float32(st.MeanQ * float64(rows))
	tail[3] = float32(st.MeanTD * float64(rows))
	if lossErr != nil {
		tail[1] = float32(math.NaN())
	}
	if err := r.AllreduceFloat32(ctx, buf); err != nil {
		return st, err
	}
	switch {
	case lossErr != nil:
		return st, fmt.Errorf("%w: %w", ErrGroupSkipped, lossErr)
	case math.IsNaN(float64(tail[1])) || math.IsInf(float64(tail[1]), 0):
		return st, fmt.Errorf("%w: another member's loss is not finite", ErrGroupSkipped)
	case tail[0] == 0:
		return st, fmt.Errorf("%w: every member's batch was empty", ErrGroupSkipped)
	}
	inv := 1 / tail[0]
	for i := range np {
		buf[i] *= inv
	}
	n := float64(tail[0])
	return Stats{Loss: float64(tail[1]) / n, MeanQ: float64(tail[2]) / n, MeanTD: float64(tail[3]) / n}, nil
}

// Loss is the batch's weighted Huber loss under the current networks,
// without a step.
func (l *Learner) Loss(b *Batch) (float64, error) {
	st, _, err := l.lossAndGrad(b, nil, false)
	return st.Loss, err
}

// lossAndGrad computes the loss and the |TD errors|, and with backward the
// gradient into l.grad.
func (l *Learner) lossAndGrad(b *Batch, td []float64, backward bool) (Stats, []float64, error) {
	if err := l.checkBatch(b); err != nil {
		return Stats{}, td, err
	}
	n, a := b.Len(), l.spec.ActionDim
	var err error
	// Targets first: the online network's Forward on s must be the last
	// one on l.ws before Backward (on an engine, slot 0 is s's).
	if l.eng != nil {
		du := l.cfg.Dueling
		if l.qTgt, err = engineQ(l.tgtEng, 0, du, a, b.NextObs, n, &l.tgt, l.qTgt); err == nil && l.cfg.Double {
			l.qNext, err = engineQ(l.eng, 1, du, a, b.NextObs, n, &l.outNext, l.qNext)
		}
		if err == nil {
			l.q, err = engineQ(l.eng, 0, du, a, b.Obs, n, &l.out, l.q)
		}
	} else {
		if l.qTgt, err = QValues(l.target, l.cfg.Dueling, b.NextObs, n, l.wsTgt, &l.tgt, l.qTgt); err == nil && l.cfg.Double {
			l.qNext, err = QValues(l.online, l.cfg.Dueling, b.NextObs, n, l.wsNext, &l.outNext, l.qNext)
		}
		if err == nil {
			l.q, err = QValues(l.online, l.cfg.Dueling, b.Obs, n, l.ws, &l.out, l.q)
		}
	}
	if err != nil {
		return Stats{}, td, fmt.Errorf("dqn: %w", err)
	}
	dLogits := grow(l.dOut.Logits, n*a)
	clear(dLogits)
	var dValues []float32
	if l.cfg.Dueling {
		dValues = grow(l.dOut.Values, n)
	}
	td = td[:0]
	var st Stats
	delta := l.cfg.HuberDelta
	for i := range n {
		next := l.qTgt[i*a : (i+1)*a]
		var boot float32
		if l.cfg.Double {
			boot = next[Argmax(l.qNext[i*a:(i+1)*a])]
		} else {
			boot = next[Argmax(next)]
		}
		y := float64(b.Rewards[i]) + float64(b.Discounts[i])*float64(boot)
		qa := float64(l.q[i*a+int(b.Actions[i])])
		e := qa - y
		w := 1.0
		if b.Weights != nil {
			w = float64(b.Weights[i])
		}
		// Huber: e²/2 inside delta, delta(|e| - delta/2) outside.
		var loss, g float64
		if math.Abs(e) <= delta {
			loss, g = e*e/2, e
		} else {
			loss, g = delta*(math.Abs(e)-delta/2), math.Copysign(delta, e)
		}
		st.Loss += w * loss / float64(n)
		st.MeanQ += qa / float64(n)
		st.MeanTD += math.Abs(e) / float64(n)
		td = append(td, math.Abs(e))
		g *= w / float64(n)
		row := dLogits[i*a : (i+1)*a]
		if l.cfg.Dueling { // dQ(a_i)/dA(a') = 1{a'=a_i} - 1/A; dQ/dV = 1
			for j := range row {
				row[j] = float32(-g / float64(a))
			}
			dValues[i] = float32(g)
		}
		row[b.Actions[i]] += float32(g)
	}
	if !finite(st.Loss) {
		return st, td, errNotFinite("loss", st.Loss)
	}
	l.dOut.Logits, l.dOut.Values = dLogits, dValues
	if !backward {
		return st, td, nil
	}
	if l.eng != nil {
		err = l.eng.ZeroGrad()
		if err == nil {
			err = l.eng.Backward(0, n, &l.dOut)
		}
	} else {
		grad := l.grad[:l.online.NumParams()]
		clear(grad)
		err = l.online.Backward(l.ws, n, &l.dOut, grad)
	}
	if err != nil {
		return st, td, fmt.Errorf("dqn: %w", err)
	}
	return st, td, nil
}

// finite says x is neither NaN nor infinite: what a loss and a gradient
// norm must be for their step to be taken.
func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

// errNotFinite is the error of a step whose loss or gradient norm (what)
// is x, not finite.
func errNotFinite(what string, x float64) error { return fmt.Errorf("dqn: %s is %v", what, x) }

// checkBatch refuses a batch the networks cannot take.
func (l *Learner) checkBatch(b *Batch) error {
	n, d, a := b.Len(), l.spec.ObsDim, l.spec.ActionDim
	switch {
	case n == 0:
		return fmt.Errorf("dqn: empty batch")
	case len(b.Obs) != n*d || len(b.NextObs) != n*d || len(b.Rewards) != n || len(b.Discounts) != n ||
		(b.Weights != nil && len(b.Weights) != n):
		return fmt.Errorf("dqn: batch of %d actions with %d obs, %d next obs, %d rewards, %d discounts, %d weights (obs dim %d)",
			n, len(b.Obs), len(b.NextObs), len(b.Rewards), len(b.Discounts), len(b.Weights), d)
	}
	for _, act := range b.Actions {
		if act < 0 || int(act) >= a {
			return fmt.Errorf("dqn: action %d out of range [0, %d)", act, a)
		}
	}
	return nil
}

// targetDue says whether updateTarget changes the target after this
// update.
func (l *Learner) targetDue() bool {
	return l.cfg.TargetUpdateEvery == 0 || l.updates%int64(l.cfg.TargetUpdateEvery) == 0
}

// updateTarget moves the target network towards the online one, as
// configured: a copy, or a Polyak step. moveTarget calls it when due.
func (l *Learner) updateTarget() {
	p, t := l.online.Params(), l.target.Params()
	if l.cfg.TargetUpdateEvery > 0 {
		copy(t, p)
		return
	}
	tau := float32(l.cfg.Tau)
	for i := range t {
		t[i] += tau * (p[i] - t[i])
	}
}

// LearnerState is everything a checkpoint needs to resume a learner.
type LearnerState struct {
	Online  []float32 `msgpack:"online"`
	Target  []float32 `msgpack:"target"`
	AdamM   []float32 `msgpack:"adam_m"`
	AdamV   []float32 `msgpack:"adam_v"`
	Step    int64     `msgpack:"adam_step"`
	Updates int64     `msgpack:"updates"`
}

// State copies the learner's state (on an engine, Adam's comes from
// there).
func (l *Learner) State() (LearnerState, error) {
	if err := l.Sync(); err != nil {
		return LearnerState{}, fmt.Errorf("dqn: state: %w", err)
	}
	if l.eng != nil {
		step, err := l.eng.AdamState(l.opt.M, l.opt.V)
		if err != nil {
			return LearnerState{}, fmt.Errorf("dqn: state: Adam state from the engine: %w", err)
		}
		l.opt.Step = step
	}
	c := func(s []float32) []float32 { return append([]float32(nil), s...) }
	return LearnerState{Online: c(l.online.Params()), Target: c(l.target.Params()), AdamM: c(l.opt.M), AdamV: c(l.opt.V),
		Step: l.opt.Step, Updates: l.updates}, nil
}

// Restore loads a state of a learner of the same architecture; a state of
// another shape is refused and nothing changes.
func (l *Learner) Restore(s LearnerState) error {
	n := l.online.NumParams()
	if len(s.Online) != n || len(s.Target) != n || len(s.AdamM) != n || len(s.AdamV) != n || s.Step < 0 || s.Updates < 0 {
		return fmt.Errorf("dqn: restore: state of %d/%d/%d/%d values (steps %d, updates %d) for %d parameters",
			len(s.Online), len(s.Target), len(s.AdamM), len(s.AdamV), s.Step, s.Updates, n)
	}
	copy(l.online.Params(), s.Online)
	copy(l.target.Params(), s.Target)
	copy(l.opt.M, s.AdamM)
	copy(l.opt.V, s.AdamV)
	l.opt.Step, l.updates = s.Step, s.Updates
	if l.eng != nil {
		err := l.eng.SetParams(s.Online)
		if err == nil {
			err = l.targetToEngines()
		}
		if err == nil {
			err = l.eng.SetAdamState(s.AdamM, s.AdamV, s.Step)
		}
		if err != nil {
			return fmt.Errorf("dqn: restore: state to the engines: %w", err)
		}
		l.stale = false
	}
	return nil
}
