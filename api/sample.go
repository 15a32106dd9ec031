package api

import (
	"errors"
	"fmt"
	"math"
)

// SampleBatch is a segment of one agent's trajectory, stored as a struct of
// arrays in time order: index t of every array describes step t. It is what
// actors send to trainers.
//
// Obs[t] is the observation the action at step t was chosen from; Rewards,
// Terminated and Truncated describe what followed that action. An episode
// may end and a new one begin inside a batch (Terminated or Truncated is 1
// at its last step), so a learner must cut returns at those steps.
type SampleBatch struct {
	Policy string `msgpack:"policy"`
	// PolicyVersion is the oldest policy version that chose an action in
	// the batch, so a trainer can bound how stale the batch is.
	PolicyVersion int64           `msgpack:"policy_version"`
	Obs           Frames          `msgpack:"obs"`          // [T, obs_dim], or [T, ...obs shape] (an image: [T, H, W, C]); binary ones travel packed
	Actions       Tensor[int32]   `msgpack:"actions"`      // [T] for discrete actions, else zero
	ContActions   Tensor[float32] `msgpack:"cont_actions"` // [T, act_dim] for continuous actions, else zero
	Rewards       Tensor[float32] `msgpack:"rewards"`      // [T]
	Terminated    Tensor[uint8]   `msgpack:"terminated"`   // [T], 1 where the episode ended by its rules
	Truncated     Tensor[uint8]   `msgpack:"truncated"`    // [T], 1 where the episode was cut by a time limit
	LogProbs      Tensor[float32] `msgpack:"logprobs"`     // [T] or zero
	Values        Tensor[float32] `msgpack:"values"`       // [T] or zero
	// BootstrapValue is the value estimate of the observation after the
	// last step, used to bootstrap returns of the unfinished episode; 0 if
	// the last step terminated.
	BootstrapValue float32 `msgpack:"bootstrap_value"`
	// Episodes are the episodes that finished inside this batch, in order.
	// Their returns and lengths cover the whole episode, including steps
	// sent in earlier batches.
	Episodes []EpisodeStat `msgpack:"episodes"`
	ActorID  string        `msgpack:"actor_id"`
	AgentID  string        `msgpack:"agent_id"`
}

// EpisodeStat summarises one finished episode for logging.
type EpisodeStat struct {
	Return float32 `msgpack:"return"`
	Length int32   `msgpack:"length"`
}

// Len returns the number of steps T.
func (b *SampleBatch) Len() int { return b.Rewards.Len() }

// Validate checks that the arrays are well formed and agree on T: the
// invariants a trainer relies on before indexing a batch that came from the
// network.
func (b *SampleBatch) Validate() error {
	if err := b.validate(); err != nil {
		return fmt.Errorf("api: invalid SampleBatch: %w", err)
	}
	return nil
}

func (b *SampleBatch) validate() error {
	for _, c := range []struct {
		name string
		err  error
	}{
		{"obs", b.Obs.Validate()},
		{"actions", b.Actions.Validate()},
		{"cont_actions", b.ContActions.Validate()},
		{"rewards", b.Rewards.Validate()},
		{"terminated", b.Terminated.Validate()},
		{"truncated", b.Truncated.Validate()},
		{"logprobs", b.LogProbs.Validate()},
		{"values", b.Values.Validate()},
	} {
		if c.err != nil {
			return fmt.Errorf("%s: %w", c.name, c.err)
		}
	}
	if len(b.Rewards.Shape) != 1 {
		return fmt.Errorf("rewards has shape %v, want [T]", b.Rewards.Shape)
	}
	n := b.Rewards.Shape[0]
	// An observation may have any shape (an image is [H, W, C]); only the
	// leading dimension must be T.
	if len(b.Obs.Shape) < 2 || b.Obs.Shape[0] != n {
		return fmt.Errorf("obs has shape %v, want [T, ...obs shape] with T=%d", b.Obs.Shape, n)
	}
	switch disc, cont := !b.Actions.IsZero(), !b.ContActions.IsZero(); {
	case disc && cont:
		return errors.New("both actions and cont_actions are set")
	case disc:
		if err := checkShape("actions", b.Actions.Shape, n, 1, false); err != nil {
			return err
		}
	case cont:
		if err := checkShape("cont_actions", b.ContActions.Shape, n, 2, false); err != nil {
			return err
		}
	default:
		return errors.New("neither actions nor cont_actions is set")
	}
	if err := checkShape("terminated", b.Terminated.Shape, n, 1, false); err != nil {
		return err
	}
	if err := checkShape("truncated", b.Truncated.Shape, n, 1, false); err != nil {
		return err
	}
	if err := checkShape("logprobs", b.LogProbs.Shape, n, 1, true); err != nil {
		return err
	}
	if err := checkShape("values", b.Values.Shape, n, 1, true); err != nil {
		return err
	}
	ends := 0
	for t := range n {
		term, trunc := b.Terminated.Data[t], b.Truncated.Data[t]
		if term > 1 || trunc > 1 {
			return fmt.Errorf("step %d: terminated=%d truncated=%d, want 0 or 1", t, term, trunc)
		}
		if term == 1 || trunc == 1 {
			ends++
		}
	}
	if len(b.Episodes) > ends {
		return fmt.Errorf("%d episode stats but only %d episode ends", len(b.Episodes), ends)
	}
	for i, e := range b.Episodes {
		if e.Length < 1 {
			return fmt.Errorf("episode %d has length %d", i, e.Length)
		}
	}
	if math.IsNaN(float64(b.BootstrapValue)) || math.IsInf(float64(b.BootstrapValue), 0) {
		return fmt.Errorf("bootstrap_value is %v", b.BootstrapValue)
	}
	return nil
}

// checkShape checks that an array has the given rank and leading dimension
// n. optional arrays may also be absent (nil shape).
func checkShape(name string, shape []int, n, rank int, optional bool) error {
	if optional && shape == nil {
		return nil
	}
	if len(shape) != rank || shape[0] != n {
		want := "[T]"
		if rank == 2 {
			want = "[T, dim]"
		}
		return fmt.Errorf("%s has shape %v, want %s with T=%d", name, shape, want, n)
	}
	return nil
}
