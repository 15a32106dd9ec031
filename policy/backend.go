package policy

import (
	"fmt"

	"github.com/distrl/distrl/nn"
)

// Backend runs a policy's network, and its categorical head, on some
// device: the CPU (the default, package nn) or an accelerator (package
// policy/cuda). The policy keeps everything else: checks, the random
// numbers, the Gaussian head's sampling and the reply. A Backend is used
// from one goroutine at a time.
type Backend interface {
	// SetParams replaces the network's parameters by params, which the
	// policy has checked: NumParams values, all finite. After it returns,
	// every Act sees all of them; on error the backend must not be used.
	SetParams(params []float32) error
	// Act evaluates batch rows of obs ([batch*ObsDim]) and fills out, whose
	// slices the caller has sized: Values ([batch]) always; for a
	// categorical head Actions and LogProbs ([batch]), the action drawn by
	// the inverse CDF with draws[i], uniform in [0, 1), as
	// nn.SampleCategoricalWith does, or the greedy one where draws is nil,
	// with action -1 and a NaN log-probability where a row's logits are not
	// finite; for a Gaussian head Mean ([batch*ActionDim]) and LogStd
	// ([ActionDim]).
	Act(obs []float32, batch int, draws []float64, out *Acted) error
	// Close releases what the backend holds (device memory, a context).
	Close() error
}

// Acted is what Backend.Act computes for one batch.
type Acted struct {
	Actions  []int32
	LogProbs []float32
	Mean     []float32
	LogStd   []float32
	Values   []float32
}

// OpenBackend opens a backend for a network: its spec, layout and current
// parameters. The backend keeps no reference to net.
type OpenBackend func(net *nn.ActorCritic) (Backend, error)

// NewCPUBackend returns the CPU backend on a copy of net, the backend a
// policy has by default, for code that wraps or compares backends.
func NewCPUBackend(net *nn.ActorCritic) Backend {
	return &cpuBackend{net: net.Clone(), gaussian: net.Spec().Head == nn.Gaussian}
}

// cpuBackend is the default Backend: package nn's forward pass and
// distribution helpers on the calling goroutine.
type cpuBackend struct {
	net      *nn.ActorCritic
	gaussian bool // the head, read once: Spec() copies
	// shared: net is the policy's own network, which the policy's
	// SetParams has already written (the default backend of New).
	shared bool
	ws     nn.Workspace
	fwd    nn.Output
}

func (c *cpuBackend) SetParams(params []float32) error {
	if c.shared {
		return nil
	}
	return c.net.SetParams(params)
}

func (c *cpuBackend) Close() error { return nil }

func (c *cpuBackend) Act(obs []float32, batch int, draws []float64, out *Acted) error {
	if err := c.net.Forward(obs, batch, &c.ws, &c.fwd); err != nil {
		return err
	}
	copy(out.Values, c.fwd.Values)
	if c.gaussian {
		copy(out.Mean, c.fwd.Mean)
		copy(out.LogStd, c.fwd.LogStd)
		return nil
	}
	a := len(c.fwd.Logits) / batch
	for i := range batch {
		logits := c.fwd.Logits[i*a : (i+1)*a]
		if draws == nil {
			act := nn.GreedyCategorical(logits)
			out.Actions[i], out.LogProbs[i] = act, nn.CategoricalLogProb(logits, act)
		} else {
			out.Actions[i], out.LogProbs[i] = nn.SampleCategoricalWith(logits, a, draws[i])
		}
	}
	return nil
}

// Check reports whether out's slices have the lengths Act writes for batch
// rows of a network of spec, so that a backend writing through pointers
// can refuse a mis-sized output instead of writing past it.
func (out *Acted) Check(spec nn.Spec, batch int) error {
	if len(out.Values) != batch {
		return fmt.Errorf("policy: act: %w: %d values for %d rows", nn.ErrShape, len(out.Values), batch)
	}
	if spec.Head == nn.Gaussian {
		if len(out.Mean) != batch*spec.ActionDim || len(out.LogStd) != spec.ActionDim {
			return fmt.Errorf("policy: act: %w: mean %d and log-std %d for %d rows of %d actions",
				nn.ErrShape, len(out.Mean), len(out.LogStd), batch, spec.ActionDim)
		}
		return nil
	}
	if len(out.Actions) != batch || len(out.LogProbs) != batch {
		return fmt.Errorf("policy: act: %w: %d actions and %d log-probabilities for %d rows",
			nn.ErrShape, len(out.Actions), len(out.LogProbs), batch)
	}
	return nil
}
