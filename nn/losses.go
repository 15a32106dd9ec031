package nn

// The types below describe a learner's step to an engine that runs it
// whole where the network is (package nn/cuda's): the loss and its
// gradient, the clipping and Adam's step, with nothing crossing back to
// the host until it is done. PPO's minibatch steps (the clipped-surrogate
// loss of a categorical actor-critic) and DQN's update (the Huber loss of
// double, dueling Q-learning). Packages algo/ppo and algo/dqn define the
// losses (their Go is the reference) and the interfaces they consume;
// the types are here so that an engine can implement them without
// importing the learners.

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

// DQNLoss is DQN's loss of a batch: the importance-weighted mean of the
// Huber loss (quadratic within HuberDelta) of Q(s, a) against
// r + discount·Q_target(s', a*), a* the target's greedy action or, with
// Double, the online network's; Q is the logits, or with Dueling
// V + A - mean(A).
type DQNLoss struct {
	HuberDelta      float64
	Double, Dueling bool
}

// DQNBatch is a batch of n transitions: observations and next
// observations [n·ObsDim], and n actions, n-step rewards, discounts and
// importance weights (all of them: 1 for none).
type DQNBatch struct {
	Obs, NextObs                []float32
	Actions                     []int32
	Rewards, Discounts, Weights []float32
}

// DQNStep is what a DQN update reports: the weighted loss, mean Q and
// mean |TD error| over the batch, and the gradient's norm before clipping.
type DQNStep struct {
	Loss, MeanQ, MeanTD float64
	Norm                float32
}
