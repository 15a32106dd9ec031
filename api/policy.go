package api

// Policy maps observations to actions. Implementations live elsewhere (a
// neural network, a remote inference server, a scripted baseline); actors
// depend only on this interface.
type Policy interface {
	// Infer computes actions for a batch of observations [B, obs_dim];
	// results go into out, whose tensors are resized as needed (see
	// [Tensor.Resize]) so a caller can reuse one Inference across calls.
	Infer(obs Tensor[float32], out *Inference) error
	// Version is the version of the parameters Infer currently uses.
	Version() int64
}

// Inference is a policy's answer for a batch of B observations. Exactly one
// of Actions and ContActions is set, matching the action space.
type Inference struct {
	Actions     Tensor[int32]   `msgpack:"actions"`      // [B] discrete actions
	ContActions Tensor[float32] `msgpack:"cont_actions"` // [B, act_dim] continuous actions
	LogProbs    Tensor[float32] `msgpack:"logprobs"`     // [B] log-probability of each action
	Values      Tensor[float32] `msgpack:"values"`       // [B] value estimates, or zero if the policy has none
	// Version is the version of the parameters that produced the answer.
	Version int64 `msgpack:"version"`
}
