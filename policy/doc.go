// Package policy turns an [nn.ActorCritic] into an [api.Policy]: batched
// inference that samples (or, in deterministic mode, picks the most likely)
// action for every observation of a batch, with its log-probability, the
// value estimate and the version of the parameters that produced it.
//
// The same [ActorCritic] serves a policy worker (package policyworker),
// which batches requests from many actors into one forward pass, and an
// actor that runs its policy inline. Both build it from a [Config]; for a
// registered environment [ConfigForEnv] derives the dimensions from the
// environment's spaces.
//
// Parameters travel as one flat []float32 (see [nn.ActorCritic.Layout])
// tagged with a version: [ActorCritic.SetParams] replaces them as a whole,
// so an answer is always computed from one consistent parameter set, and
// the version it reports lets a learner tell how stale a sample is.
// Version 0 is the random initialisation derived from Config.Seed.
//
// Where the network runs is a [Backend]: the CPU (package nn) by default,
// or a GPU ([NewOn] with package policy/cuda's opener). The policy keeps
// the rest, the random numbers included: it draws one uniform per row of a
// sampling categorical policy and hands them to the backend, whose head
// samples by the inverse CDF, so every backend gives the same actions for
// the same seed. Gaussian actions are drawn from the backend's means here.
package policy
