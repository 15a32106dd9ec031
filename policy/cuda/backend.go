//go:build cuda || cudaemu

package cuda

import (
	"fmt"
	"time"
	"unsafe"

	"github.com/distrl/distrl/nn"
	nncuda "github.com/distrl/distrl/nn/cuda"
	"github.com/distrl/distrl/policy"
)

// ErrDevice is wrapped by the errors of Open when the device cannot be used:
// no driver, no such device, or the CUDA driver failed to set it up.
var ErrDevice = nncuda.ErrDevice

// Devices lists the GPUs the driver sees (nn/cuda's Devices).
var Devices = nncuda.Devices

// Backend is a policy.Backend on one GPU. Use it from one goroutine at a
// time, as policy.Backend says.
type Backend struct {
	c    *nncuda.Context
	net  *nncuda.Net
	acts nncuda.Activations

	spec            nn.Spec
	logStd          []float32 // host copy: the same for every row
	logStdOff       int
	rows            int            // rows the staging buffers hold
	in, out         nncuda.Buffer  // [obs f32][draws f64] in; [values][logp][actions] or [values][mean] out
	hostIn, hostOut unsafe.Pointer // pinned: in's and out's host sides

	profile bool
	timings Timings
}

var _ policy.Backend = (*Backend)(nil)

// Timings is where a profiled backend's batches spent their time.
type Timings struct {
	Batches int64
	Rows    int64
	CopyIn  time.Duration // observations and draws to the device
	Kernels time.Duration // every layer and the head, from the first launch to completion
	CopyOut time.Duration // results to the host
}

// Opener returns a policy.OpenBackend that opens a Backend on GPU ordinal.
func Opener(ordinal int) policy.OpenBackend {
	return func(net *nn.ActorCritic) (policy.Backend, error) { return Open(ordinal, net) }
}

// Open creates a context on GPU ordinal, loads the kernels and uploads
// net's parameters.
func Open(ordinal int, net *nn.ActorCritic) (*Backend, error) {
	c, unlock, err := nncuda.OpenContext(ordinal)
	if err != nil {
		return nil, err
	}
	defer unlock()
	b := &Backend{c: c, spec: net.Spec(), logStdOff: -1}
	if b.net, err = nncuda.NewNet(c, net); err != nil {
		_ = c.Close()
		return nil, err
	}
	if b.spec.Head == nn.Gaussian {
		b.logStdOff = net.Architecture().LogStd
		b.logStd = append([]float32(nil), net.Params()[b.logStdOff:b.logStdOff+b.spec.ActionDim]...)
	}
	return b, nil
}

// SetParams uploads params whole; it returns once they are on the device.
func (b *Backend) SetParams(params []float32) error {
	unlock, err := b.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.net.SetParams(params); err != nil {
		return err
	}
	if b.logStdOff >= 0 {
		b.logStd = append(b.logStd[:0], params[b.logStdOff:b.logStdOff+b.spec.ActionDim]...)
	}
	return nil
}

// SetProfile makes every Act wait for its kernels before the copy out, so
// that Timings splits a batch's time into its copies and its kernels. It
// costs a synchronisation per batch; benchmarks use it.
func (b *Backend) SetProfile(on bool) { b.profile = on }

// Timings returns the totals since the last ResetTimings, as far as
// profiling was on.
func (b *Backend) Timings() Timings { return b.timings }

// ResetTimings zeroes Timings.
func (b *Backend) ResetTimings() { b.timings = Timings{} }

// reserve sizes the batch buffers for rows rows.
func (b *Backend) reserve(rows int) error {
	if rows <= b.rows {
		return nil
	}
	rows = max(rows, 2*b.rows, 64)
	b.freeHost()
	s := b.spec
	outBytes := rows * 4 * (1 + max(2, s.ActionDim)) // values, then logp+actions or mean
	inBytes := (4*rows*s.ObsDim+7)&^7 + 8*rows
	err := b.acts.Reserve(b.net, rows)
	if err == nil {
		err = b.in.Reserve(inBytes)
	}
	if err == nil {
		err = b.out.Reserve(outBytes)
	}
	if err == nil {
		b.hostIn, err = nncuda.AllocHost(inBytes)
	}
	if err == nil {
		b.hostOut, err = nncuda.AllocHost(outBytes)
	}
	if err != nil {
		b.freeHost()
		return fmt.Errorf("cuda: allocate buffers for %d rows: %w", rows, err)
	}
	b.rows = rows
	return nil
}

func (b *Backend) freeHost() {
	for _, p := range []*unsafe.Pointer{&b.hostIn, &b.hostOut} {
		if *p != nil {
			nncuda.FreeHost(*p)
			*p = nil
		}
	}
	b.rows = 0
}

// Act runs one batch: see policy.Backend.
func (b *Backend) Act(obs []float32, batch int, draws []float64, out *policy.Acted) error {
	s := b.spec
	if batch <= 0 || len(obs) != batch*s.ObsDim || draws != nil && len(draws) != batch {
		return fmt.Errorf("cuda: act: %w: %d observations and %d draws for %d rows of %d", nn.ErrShape, len(obs), len(draws), batch, s.ObsDim)
	}
	if err := out.Check(s, batch); err != nil {
		return err
	}
	unlock, err := b.c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.reserve(batch); err != nil {
		return err
	}
	t0 := time.Now()

	// In: [obs][draws], one copy from one pinned buffer to b.in.
	obsBytes := 4 * len(obs)
	drawsAt := (obsBytes + 7) &^ 7
	copy(unsafe.Slice((*float32)(b.hostIn), len(obs)), obs)
	n := obsBytes
	if draws != nil {
		copy(unsafe.Slice((*float64)(unsafe.Add(b.hostIn, drawsAt)), batch), draws)
		n = drawsAt + 8*batch
	}
	if err := nncuda.MemcpyHtoD(b.in.Ptr, b.hostIn, int64(n)); err != nil {
		return fmt.Errorf("cuda: copy observations in: %w", err)
	}
	t1 := time.Now()

	pi, v, err := b.net.Forward(&b.acts, b.in.Ptr, batch)
	if err != nil {
		return err
	}
	// Out: [values][logp][actions] or [values][mean], gathered on the
	// device so that one copy brings them.
	values := b.out.Ptr
	if err := nncuda.MemcpyDtoD(values, v, int64(4*batch)); err != nil {
		return fmt.Errorf("cuda: gather values: %w", err)
	}
	gaussian := s.Head == nn.Gaussian
	outBytes := 4 * batch * (1 + s.ActionDim)
	if gaussian {
		if err := nncuda.MemcpyDtoD(values+nncuda.DevicePtr(4*batch), pi, int64(4*batch*s.ActionDim)); err != nil {
			return fmt.Errorf("cuda: gather means: %w", err)
		}
	} else {
		logp := values + nncuda.DevicePtr(4*batch)
		actions := logp + nncuda.DevicePtr(4*batch)
		u := nncuda.DevicePtr(0)
		if draws != nil {
			u = b.in.Ptr + nncuda.DevicePtr(drawsAt)
		}
		if err := b.c.Launch("categorical", [3]int{(batch + 127) / 128, 1, 1}, [3]int{128, 1, 1},
			pi, u, batch, s.ActionDim, actions, logp); err != nil {
			return err
		}
		outBytes = 12 * batch
	}
	if b.profile {
		if err := nncuda.Synchronize(); err != nil {
			return fmt.Errorf("cuda: kernels: %w", err)
		}
	}
	t2 := time.Now()
	if err := nncuda.MemcpyDtoH(b.hostOut, b.out.Ptr, int64(outBytes)); err != nil {
		return fmt.Errorf("cuda: copy results out: %w", err)
	}
	t3 := time.Now()
	host := unsafe.Slice((*float32)(b.hostOut), outBytes/4)
	copy(out.Values, host[:batch])
	if gaussian {
		copy(out.Mean, host[batch:])
		copy(out.LogStd, b.logStd)
	} else {
		copy(out.LogProbs, host[batch:2*batch])
		copy(out.Actions, unsafe.Slice((*int32)(unsafe.Pointer(&host[2*batch])), batch))
	}
	if b.profile {
		b.timings.Batches++
		b.timings.Rows += int64(batch)
		b.timings.CopyIn += t1.Sub(t0)
		b.timings.Kernels += t2.Sub(t1)
		b.timings.CopyOut += t3.Sub(t2)
	}
	return nil
}

// Close frees the device memory and destroys the context.
func (b *Backend) Close() error {
	unlock, err := b.c.Lock()
	if err != nil {
		return err
	}
	b.freeHost()
	unlock()
	return b.c.Close() // frees the device memory with the context
}
