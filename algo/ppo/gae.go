package ppo

import (
	"fmt"

	"github.com/distrl/distrl/api"
)

// GAE computes generalized advantage estimates (Schulman et al., 2016) and
// the matching returns for the T steps of one time-major batch:
//
//	δ_t = r_t + γ·V_next(t) - V_t
//	A_t = δ_t + γλ·A_{t+1}     (A_{t+1} = 0 where the episode ends at t)
//	R_t = A_t + V_t
//
// V_next(t) is Values[t+1] inside an episode, 0 after a Terminated step,
// and BootstrapValue after the last step unless it terminated. A Truncated
// (not Terminated) step before the last one ends its episode, but the
// value of the observation after it is not in the batch; GAE treats it as
// terminal (V_next = 0) and returns how many such steps it found, so the
// caller can notice that its actor splits batches differently from the
// actorworker convention (batches end at truncations). A step both
// terminated and truncated counts as terminated.
//
// advantages and returns must have T elements each; the batch must have
// Values and T rewards and flags. Arithmetic is in float64.
func GAE(b *api.SampleBatch, gamma, lambda float64, advantages, returns []float32) (midTruncations int, err error) {
	if b == nil {
		return 0, fmt.Errorf("ppo: GAE: %w: nil batch", ErrInvalidBatch)
	}
	n := b.Rewards.Len()
	if len(b.Values.Data) != n || len(b.Terminated.Data) != n || len(b.Truncated.Data) != n {
		return 0, fmt.Errorf("ppo: GAE: %w: %d rewards but %d values, %d terminated and %d truncated flags",
			ErrInvalidBatch, n, len(b.Values.Data), len(b.Terminated.Data), len(b.Truncated.Data))
	}
	if len(advantages) != n || len(returns) != n {
		return 0, fmt.Errorf("ppo: GAE: %d advantages and %d returns for %d steps", len(advantages), len(returns), n)
	}
	rewards, values := b.Rewards.Data, b.Values.Data
	term, trunc := b.Terminated.Data, b.Truncated.Data
	gl := gamma * lambda
	var carry float64 // A_{t+1}, or 0 across an episode end
	for t := n - 1; t >= 0; t-- {
		var next float64
		switch {
		case term[t] != 0:
			carry = 0
		case t == n-1:
			next = float64(b.BootstrapValue) // carry is already 0
		case trunc[t] != 0:
			carry = 0
			midTruncations++
		default:
			next = float64(values[t+1])
		}
		v := float64(values[t])
		carry = float64(rewards[t]) + gamma*next - v + gl*carry
		advantages[t] = float32(carry)
		returns[t] = float32(carry + v)
	}
	return midTruncations, nil
}
