// Package env implements built-in environments behind the [api.Env]
// interface:
//
//   - CartPole-v1 ([CartPole]), a faithful port of Gymnasium's classic
//     control task, single agent;
//   - simple_spread ([SimpleSpread]), the cooperative navigation task of
//     the multi-agent particle environments (MPE), N agents sharing one
//     reward.
//
// They are pure Go, so actors can step thousands of them without a Python
// interpreter. [Register] adds them to the api registry; it is explicit,
// not an init side effect, so a program decides which environments exist.
package env
