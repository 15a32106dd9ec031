// Package algo is the home of distrl's learning algorithms. Each algorithm
// lives in its own subpackage (ppo for Proximal Policy Optimization) and
// turns the api.SampleBatch values that actors produce into parameter
// updates of an nn.ActorCritic. None of them knows about sockets, workers
// or processes, so each can be tested and benchmarked in one process and
// wrapped by a trainer worker unchanged.
package algo
