// Package ppo implements Proximal Policy Optimization (Schulman et al.,
// 2017) with the clipped surrogate objective, over the [nn.ActorCritic]
// networks of package nn and the time-major [api.SampleBatch]es that
// actors send.
//
// The network may start with convolutions (nn.Spec.Conv) for image
// observations; a batch then carries each step's image flat, channels
// last ([T, H·W·C]). The learner takes the values after the time
// dimension as one observation whatever their shape, so it needs no
// change when batches carry [T, H, W, C].
//
// A [Learner] owns a network, an Adam optimizer and a seeded random
// generator. [Learner.Update] takes the batches collected since the last
// update, computes advantages and returns per batch with generalized
// advantage estimation ([GAE]), normalises the advantages over the whole
// update, and runs Config.Epochs passes of shuffled minibatch gradient
// steps on
//
//	loss = -mean(min(r·A, clip(r, 1-ε, 1+ε)·A))   policy (clipped surrogate)
//	     + ValueCoef · 0.5·mean((V - R)²)         value (optionally clipped)
//	     - EntropyCoef · mean(H)                  entropy bonus
//
// where r = exp(log π(a|s) - log π_old(a|s)) is the probability ratio
// against the policy that collected the batch (SampleBatch.LogProbs). The
// numerics follow CleanRL's ppo.py (gradient-norm clipping, Adam with
// eps 1e-5, linear learning-rate decay, the "(r-1) - log r" KL estimate),
// so hyperparameters carry over, with two deliberate differences:
// advantages are normalised once per update rather than per minibatch, and
// truncated episodes bootstrap from the value of their final observation
// instead of being treated as terminated.
//
// # Episode boundaries
//
// A batch is one agent's trajectory segment and may contain the ends of
// several episodes. A Terminated step has no future: its next value is 0
// and no advantage flows back across it. The last step of a batch that did
// not terminate (a time-limit truncation, or a cut every N steps)
// bootstraps from SampleBatch.BootstrapValue, which the actor sets to the
// value of the observation after it. A Truncated step before the last one
// has no such value in the batch (the actors of package actorworker end a
// batch at every truncation, so it does not happen with them); GAE
// treats it as terminal and reports how many it saw, and Update counts
// them in [Stats].MidBatchTruncations.
//
// # Engines
//
// [Learner.SetEngine] moves the network's passes, the clipping and Adam
// onto an [nn.Engine] (a GPU's: package nn/cuda). The update's
// observations cross once; each minibatch's outputs come back, its loss
// is computed here and its gradient goes back. An engine that takes whole
// steps (nn/cuda's) is instead given every minibatch of the update at
// once (of each epoch where TargetKL may stop it) and computes the loss
// itself, with nothing crossing back until the steps are done: its loss
// is this package's, compiled from nn/cuda's surrogate.h, which the tests
// hold to this package's on any machine. A data-parallel group's members
// take their steps one at a time, reducing each minibatch's gradient.
//
// # Checkpoints
//
// [Learner.State] captures everything needed to resume bit for bit: the
// parameters, Adam's moments and step, the update counter (which drives
// the learning-rate schedule) and the shuffling generator.
//
// A Learner is not safe for concurrent use. Errors are returned, never
// panicked.
package ppo
