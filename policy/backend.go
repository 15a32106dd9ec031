package policy

import (
	"fmt"
	"sync"

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
// policy has by default, for code that wraps or compares backends. threads
// is as Config.Threads.
func NewCPUBackend(net *nn.ActorCritic, threads int) Backend {
	return newCPUBackend(net.Clone(), threads, false)
}

// cpuBackend is the default Backend: package nn's forward pass and
// distribution helpers, on the calling goroutine or, for a batch large
// enough, on several at once.
type cpuBackend struct {
	net      *nn.ActorCritic
	gaussian bool // the head, read once: Spec() copies
	obsDim   int
	// shared: net is the policy's own network, which the policy's
	// SetParams has already written (the default backend of New).
	shared bool
	// parts hold one workspace and output per thread; part 0 runs on the
	// calling goroutine.
	parts []cpuPart
	wg    sync.WaitGroup
}

type cpuPart struct {
	ws  nn.Workspace
	fwd nn.Output
	err error
}

// minPartRows is the fewest rows a thread is given: below it the hand-off
// to another goroutine (a wake-up, about a microsecond or two) costs more
// than the share of the forward pass it saves.
const minPartRows = 64

func newCPUBackend(net *nn.ActorCritic, threads int, shared bool) *cpuBackend {
	spec := net.Spec()
	return &cpuBackend{
		net: net, gaussian: spec.Head == nn.Gaussian, obsDim: spec.ObsDim, shared: shared,
		parts: make([]cpuPart, max(threads, 1)),
	}
}

func (c *cpuBackend) SetParams(params []float32) error {
	if c.shared {
		return nil
	}
	return c.net.SetParams(params)
}

func (c *cpuBackend) Close() error { return nil }

// Act splits the batch into up to len(c.parts) runs of rows that differ in
// length by at most one and evaluates them at once. A GEMM's rows are
// independent and each row has its own draw, so the answers are one
// goroutine's to float32 rounding (a BLAS may order a part's sums otherwise
// than the whole's), and so are the actions, but for a draw within that
// rounding of a boundary between two.
func (c *cpuBackend) Act(obs []float32, batch int, draws []float64, out *Acted) error {
	k := min(len(c.parts), batch/minPartRows)
	if k <= 1 {
		return c.actRows(&c.parts[0], obs, 0, batch, draws, out)
	}
	for i := 1; i < k; i++ {
		c.wg.Go(func() {
			c.parts[i].err = c.actRows(&c.parts[i], obs, i*batch/k, (i+1)*batch/k, draws, out)
		})
	}
	err := c.actRows(&c.parts[0], obs, 0, batch/k, draws, out)
	c.wg.Wait()
	for i := 1; i < k && err == nil; i++ {
		err = c.parts[i].err
	}
	return err
}

// actRows is Act for the rows [lo, hi) of the batch, with p's buffers.
func (c *cpuBackend) actRows(p *cpuPart, obs []float32, lo, hi int, draws []float64, out *Acted) error {
	n, d := hi-lo, c.obsDim
	if err := c.net.Forward(obs[lo*d:hi*d], n, &p.ws, &p.fwd); err != nil {
		return err
	}
	copy(out.Values[lo:hi], p.fwd.Values)
	if c.gaussian {
		a := len(p.fwd.Mean) / n
		copy(out.Mean[lo*a:hi*a], p.fwd.Mean)
		if lo == 0 { // the same for every row: written once
			copy(out.LogStd, p.fwd.LogStd)
		}
		return nil
	}
	a := len(p.fwd.Logits) / n
	for i := range n {
		logits := p.fwd.Logits[i*a : (i+1)*a]
		r := lo + i
		if draws == nil {
			act := nn.GreedyCategorical(logits)
			out.Actions[r], out.LogProbs[r] = act, nn.CategoricalLogProb(logits, act)
		} else {
			out.Actions[r], out.LogProbs[r] = nn.SampleCategoricalWith(logits, a, draws[r])
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
