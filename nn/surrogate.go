package nn

// The types below describe PPO's minibatch step to an engine that runs it
// whole where the network is (package nn/cuda's): the clipped-surrogate
// loss of a categorical actor-critic, its gradient, the clipping and
// Adam's step, with nothing crossing back to the host between
// minibatches. Package algo/ppo defines the loss (its rowsLoss is the
// reference) and the interface it consumes; they are here so that an
// engine can implement it without importing the learner.

// SurrogateLoss is PPO's loss of a minibatch, as means over its rows:
// policy + ValueCoef·value - EntropyCoef·entropy, where policy is
// -min(r·A, clip(r, 1±ClipEps)·A), value 0.5·(V-R)² (or, with
// ClipValue, the larger of that and the error of V clipped to within
// ClipEps of the recorded value), and entropy the categorical head's.
type SurrogateLoss struct {
	ClipEps, ValueCoef, EntropyCoef float64
	ClipValue                       bool
}

// SurrogateRows are what the loss needs of each staged row beside its
// observation: the action taken, the behaviour policy's log-probability
// and value, the (standardised) advantage and the return. Each is as long
// as the staged rows.
type SurrogateRows struct {
	Actions                          []int32
	OldLogp, OldValues, Adv, Returns []float32
}

// SurrogateStep is what one minibatch step reports: its loss's terms as
// sums over its rows (the learner divides), and the gradient's norm
// before clipping.
type SurrogateStep struct {
	Policy, Value, Entropy, ApproxKL, ClipFrac float64
	Norm                                       float32
}
