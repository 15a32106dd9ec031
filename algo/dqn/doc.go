// Package dqn is deep Q-learning for discrete actions, as Ape-X's learner
// runs it: double DQN on n-step targets, a target network updated hard
// (copied every TargetUpdateEvery updates) or by Polyak averaging (Tau),
// the Huber loss weighted by importance weights, an optional dueling head,
// gradient clipping, and the |TD error| of every sample returned as its new
// priority.
//
// The Q network is an nn.ActorCritic with a categorical head: its logits
// are Q(s, ·). With Dueling the value head is V(s) and the logits are the
// advantages, on a shared trunk: Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a').
// A spec with convolutions (nn.Spec.Conv) gives a Q network on images, as
// the MinAtar paper's DQN (policy.MinAtarConv, then a hidden layer of 128,
// ReLU); the convolutions are shared by both heads either way, and Obs
// and NextObs hold each image flat, channels last.
//
// A batch holds transitions as localreplay makes them: s_t, a_t, the
// discounted n-step reward sum R, s_{t+m} and the discount gamma^m (0 when
// the episode terminated within the n steps). The target is
//
//	y = R + discount * Q_target(s_{t+m}, argmax_a Q_online(s_{t+m}, a))
//
// (double DQN; with Double false the max of Q_target), and the loss is
// mean_i w_i Huber_delta(Q_online(s_i, a_i) - y_i).
//
// [Learner.SetEngine] moves the networks onto engines (a GPU's: package
// nn/cuda), the loss staying here; an engine that takes whole updates
// (nn/cuda's) computes the loss itself from nn/cuda's dqnloss.h, which
// the tests hold to this package's on any machine, and only the stats and
// priorities come back from an update.
//
// Actors act epsilon-greedily; Ape-X gives actor i of N the epsilon
// ApeXEpsilon(i, N) = 0.4^(1 + 7 i/(N-1)).
package dqn
