// Package localreplay is the actor's side of distributed replay
// (Memoire's client): a bounded local memory of episodes, the returns of
// every step, and the first phase of two-phase prioritized sampling.
//
// An actor opens an episode at its first frame, records each step
// (action, reward vector, its value estimates, the next frame) and closes
// it as terminated or truncated (with V(s_T) to bootstrap from). At close
// every step t of an episode of T steps gets, with r the reward vector's
// dot product with RewardWeights and boot(j) = V(s_j) for j < T, boot(T) =
// 0 if terminated else the bootstrap:
//
//	m     = min(n, T-t)
//	R_t   = sum_{k<m} gamma^k r_{t+k}              (and per reward dimension)
//	G^n_t = R_t + gamma^m boot(t+m)                 (n-step return)
//	G^λ_t = r_t + gamma ((1-λ) boot(t+1) + λ G^λ_{t+1}),  G^λ_T = boot(T)
//
// so λ = 1 is the Monte-Carlo return (bootstrapped at a truncation) and λ =
// 0 the one-step TD target. A transition carries s_t, a_t, R_t, s_{t+m} and
// the discount gamma^m (0 when the episode terminated at t+m), which is
// what a DQN learner needs for its n-step double-Q target, plus both
// returns and an initial priority |G^n_t - Estimate_t| + eps (Ape-X: the
// actor's own Q(s_t, a_t) as the estimate).
//
// Frames are stored once: an observation of FrameStack frames is built
// from the episode's frame list when a transition leaves the memory (the
// first frame repeats before the episode's start).
//
// A Transition travels as msgpack; its observations (Frames) are packed to
// one bit per value when every value is 0 or 1, as MinAtar's are (a
// Breakout transition: about 260 bytes instead of 3.3 KB), else they are
// api.Tensors. DecodeTransition checks an item before decoding it.
//
// The memory holds at most MaxTransitions transitions (open episodes
// included) and MaxEpisodes closed episodes; the oldest closed episodes
// are dropped, and counted, to stay within both.
//
// # Two-phase sampling
//
// Actor k holds transitions with priorities p_i and local mass
// S_k = sum_{i in k} p_i^alpha. Sampling the union of all memories
// directly would pick i with P(i) = p_i^alpha / S, S = sum_k S_k.
//
// Phase one (SampleCache): actor k draws a cache of m_k transitions,
// independently, each i with q_k(i) = p_i^alpha / S_k, and pushes it with
// S_k. Phase two (the server): every cached item of actor k gets the
// server priority S_k / m_k (Cache.ServerPriority) in a table sampled
// proportionally (alpha 1), holding one cache per actor. The server picks
// a given entry of cache k with probability (S_k/m_k) / S, so, with c_i
// the number of times i was drawn into the cache (E[c_i] = m_k q_k(i)),
//
//	P(server draws i) = c_i (S_k/m_k) / S,   E[...] = m_k q_k(i) (S_k/m_k) / S = p_i^alpha / S:
//
// each server draw, taken over the cache draws, picks i with exactly the
// union's probability. Draws from one cache are correlated (more spread
// than direct sampling, shrinking as m_k grows and caches are refreshed);
// TestTwoPhaseMatchesUnion checks the marginal with a chi-square test. The learner's importance weight for i uses P(i) = p_i^alpha / S.
//
// Actors may instead insert every transition with its initial priority
// (TakeNew; Ape-X), and the server's own prioritized sampling is then the
// only phase.
package localreplay
