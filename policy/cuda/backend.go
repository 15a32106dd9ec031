//go:build cuda

package cuda

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
import "C"

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"time"
	"unsafe"

	// Initialises the driver before cu does, with a clear message.
	_ "github.com/distrl/distrl/internal/cudainit"
	"github.com/distrl/distrl/nn"
	"github.com/distrl/distrl/policy"
	"gorgonia.org/cu"
)

//go:embed kernels.ptx
var ptx string

// Activation codes of kernels.cu.
const (
	actNone = 0
	actTanh = 1
	actReLU = 2
)

// narrowMax is kernels.cu's NARROW: the widest layer dense_narrow computes.
const narrowMax = 8

// ErrDevice is wrapped by the errors of Open when the device cannot be used:
// no such device, or the CUDA driver failed to set it up.
var ErrDevice = errors.New("cuda: device unavailable")

// ErrUnsupported is wrapped by the error of Open for a network the kernels
// cannot run: one with convolutions (nn.Spec.Conv), which kernels.cu has
// no kernel for yet. Evaluating only its dense layers would answer
// silently wrong, so Open refuses it; such a policy runs on the CPU.
var ErrUnsupported = errors.New("cuda: network not supported")

// layer is one dense layer of the network on the device.
type layer struct {
	in, out int
	w, b    int   // offsets of W and b in the parameter vector
	act     int32 // activation code
	y       cu.DevicePtr
}

// Backend is a policy.Backend on one GPU. Use it from one goroutine at a
// time, as policy.Backend says.
type Backend struct {
	ordinal int
	ctx     cu.CUContext
	mod     cu.Module
	dense   cu.Function
	narrow  cu.Function
	head    cu.Function

	spec            nn.Spec
	trunk, pi, v    []layer
	logStd          []float32 // host copy: the same for every row
	logStdOff       int
	params          cu.DevicePtr
	nparams         int
	rows            int            // rows the batch buffers hold
	in, out         cu.DevicePtr   // staging on the device: [draws f64][obs f32], [values][logp][actions] or [values][mean]
	hostIn, hostOut unsafe.Pointer // pinned

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

// Devices lists the GPUs the driver sees, one line each: ordinal, name,
// compute capability, memory.
func Devices() ([]string, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("%w: count devices: %v", ErrDevice, err)
	}
	var out []string
	for i := range n {
		d, err := cu.GetDevice(i)
		if err != nil {
			return nil, fmt.Errorf("%w: device %d: %v", ErrDevice, i, err)
		}
		name, _ := d.Name()
		maj, min, _ := d.ComputeCapability()
		mem, _ := d.TotalMem()
		out = append(out, fmt.Sprintf("cuda:%d %s (compute capability %d.%d, %.1f GiB)", i, name, maj, min, float64(mem)/(1<<30)))
	}
	return out, nil
}

// Opener returns a policy.OpenBackend that opens a Backend on GPU ordinal.
func Opener(ordinal int) policy.OpenBackend {
	return func(net *nn.ActorCritic) (policy.Backend, error) { return Open(ordinal, net) }
}

// Open creates a context on GPU ordinal, loads the kernels and uploads
// net's parameters.
func Open(ordinal int, net *nn.ActorCritic) (*Backend, error) {
	// Checked first, so the answer does not depend on the device.
	if conv := net.Spec().Conv; len(conv) > 0 {
		return nil, fmt.Errorf("%w: %d convolutional layers (%+v): the CUDA backend runs dense layers only; use device cpu",
			ErrUnsupported, len(conv), conv)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("%w: count devices: %v", ErrDevice, err)
	}
	if ordinal >= n {
		return nil, fmt.Errorf("%w: cuda:%d: the driver sees %d CUDA devices", ErrDevice, ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("%w: cuda:%d: %v", ErrDevice, ordinal, err)
	}
	ctx, err := dev.MakeContext(cu.SchedAuto)
	if err != nil {
		return nil, fmt.Errorf("%w: cuda:%d: create context: %v", ErrDevice, ordinal, err)
	}
	b := &Backend{ordinal: ordinal, ctx: ctx, spec: net.Spec(), logStdOff: -1}
	if err := b.setUp(net); err != nil {
		b.closeLocked()
		return nil, err
	}
	return b, nil
}

// setUp loads the module, lays the network out and uploads the parameters;
// the context is current.
func (b *Backend) setUp(net *nn.ActorCritic) error {
	var err error
	if b.mod, err = cu.LoadData(ptx); err != nil {
		return fmt.Errorf("cuda: load kernels: %w", err)
	}
	for name, fn := range map[string]*cu.Function{"dense": &b.dense, "dense_narrow": &b.narrow, "categorical": &b.head} {
		if *fn, err = b.mod.Function(name); err != nil {
			return fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
	}
	offsets := map[string]int{}
	for _, p := range net.Layout() {
		offsets[p.Name] = p.Offset
	}
	act := int32(actTanh)
	if b.spec.Activation == nn.ReLU {
		act = actReLU
	}
	chain := func(name string, in int, hidden []int, headOut int) []layer {
		var ls []layer
		for i, h := range append(append([]int(nil), hidden...), headOut) {
			if i == len(hidden) && headOut == 0 {
				break
			}
			prefix := name + "." + strconv.Itoa(i)
			l := layer{in: in, out: h, w: offsets[prefix+".w"], b: offsets[prefix+".b"], act: act}
			if i == len(hidden) {
				l.act = actNone
			}
			ls = append(ls, l)
			in = h
		}
		return ls
	}
	s := b.spec
	if s.SharedTrunk {
		b.trunk = chain("trunk", s.ObsDim, s.Hidden, 0)
		in := s.ObsDim
		if len(s.Hidden) > 0 {
			in = s.Hidden[len(s.Hidden)-1]
		}
		b.pi, b.v = chain("pi", in, nil, s.ActionDim), chain("v", in, nil, 1)
	} else {
		b.pi, b.v = chain("pi", s.ObsDim, s.Hidden, s.ActionDim), chain("v", s.ObsDim, s.Hidden, 1)
	}
	if s.Head == nn.Gaussian {
		b.logStdOff = offsets["logstd"]
	}
	b.nparams = net.NumParams()
	if b.params, err = cu.MemAlloc(int64(4 * b.nparams)); err != nil {
		return fmt.Errorf("cuda: allocate %d parameters: %w", b.nparams, err)
	}
	return b.upload(net.Params())
}

// lock makes the backend's context current on this goroutine's thread,
// which stays locked until the returned function runs.
func (b *Backend) lock() (unlock func(), err error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("cuda: make the context current: %w", err)
	}
	return runtime.UnlockOSThread, nil
}

// SetParams uploads params whole; it returns once they are on the device.
func (b *Backend) SetParams(params []float32) error {
	if len(params) != b.nparams {
		return fmt.Errorf("cuda: set params: got %d values, the network has %d", len(params), b.nparams)
	}
	unlock, err := b.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return b.upload(params)
}

func (b *Backend) upload(params []float32) error {
	if err := cu.MemcpyHtoD(b.params, unsafe.Pointer(&params[0]), int64(4*len(params))); err != nil {
		return fmt.Errorf("cuda: upload parameters: %w", err)
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
	b.freeBatch()
	s := b.spec
	inBytes := rows * (8 + 4*s.ObsDim)
	outBytes := rows * 4 * (1 + max(2, s.ActionDim)) // values, then logp+actions or mean
	var err error
	alloc := func(p *cu.DevicePtr, n int) {
		if err == nil {
			*p, err = cu.MemAlloc(int64(n))
		}
	}
	alloc(&b.in, inBytes)
	alloc(&b.out, outBytes)
	for _, ls := range [][]layer{b.trunk, b.pi, b.v} {
		for i := range ls {
			alloc(&ls[i].y, 4*rows*ls[i].out)
		}
	}
	if err == nil {
		b.hostIn, err = allocHost(inBytes)
	}
	if err == nil {
		b.hostOut, err = allocHost(outBytes)
	}
	if err != nil {
		b.freeBatch()
		return fmt.Errorf("cuda: allocate buffers for %d rows: %w", rows, err)
	}
	b.rows = rows
	return nil
}

// allocHost allocates n bytes of page-locked host memory, which the
// device copies to and from directly (gorgonia.org/cu has no binding).
func allocHost(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.cuMemAllocHost(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemAllocHost(%d): CUDA error %d", n, int(r))
	}
	return p, nil
}

func (b *Backend) freeBatch() {
	for _, p := range []*cu.DevicePtr{&b.in, &b.out} {
		if *p != 0 {
			_ = cu.MemFree(*p)
			*p = 0
		}
	}
	for _, ls := range [][]layer{b.trunk, b.pi, b.v} {
		for i := range ls {
			if ls[i].y != 0 {
				_ = cu.MemFree(ls[i].y)
				ls[i].y = 0
			}
		}
	}
	for _, p := range []*unsafe.Pointer{&b.hostIn, &b.hostOut} {
		if *p != nil {
			C.cuMemFreeHost(*p)
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
	unlock, err := b.lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := b.reserve(batch); err != nil {
		return err
	}
	t0 := time.Now()

	// In: [draws][obs], one copy.
	drawBytes := 8 * len(draws)
	if draws != nil {
		copy(unsafe.Slice((*float64)(b.hostIn), batch), draws)
	}
	copy(unsafe.Slice((*float32)(unsafe.Add(b.hostIn, drawBytes)), len(obs)), obs)
	if err := cu.MemcpyHtoD(b.in, b.hostIn, int64(drawBytes+4*len(obs))); err != nil {
		return fmt.Errorf("cuda: copy observations in: %w", err)
	}
	t1 := time.Now()

	// Out: [values][logp][actions] or [values][mean].
	values := b.out
	x := b.in + cu.DevicePtr(drawBytes)
	if len(b.trunk) > 0 {
		if x, err = b.runChain(b.trunk, x, batch, 0); err != nil {
			return err
		}
	}
	if _, err := b.runChain(b.v, x, batch, values); err != nil {
		return err
	}
	gaussian := s.Head == nn.Gaussian
	headOut := values + cu.DevicePtr(4*batch) // the Gaussian mean, copied out as it is
	if !gaussian {
		headOut = 0 // logits stay in the head layer's own buffer
	}
	logits, err := b.runChain(b.pi, x, batch, headOut)
	if err != nil {
		return err
	}
	outBytes := 4 * batch * (1 + s.ActionDim)
	if !gaussian {
		logp := values + cu.DevicePtr(4*batch)
		actions := logp + cu.DevicePtr(4*batch)
		u := cu.DevicePtr(0)
		if draws != nil {
			u = b.in
		}
		n, a := int32(batch), int32(s.ActionDim)
		args := []unsafe.Pointer{unsafe.Pointer(&logits), unsafe.Pointer(&u), unsafe.Pointer(&n), unsafe.Pointer(&a),
			unsafe.Pointer(&actions), unsafe.Pointer(&logp)}
		if err := b.head.Launch((batch+127)/128, 1, 1, 128, 1, 1, 0, cu.Stream{}, args); err != nil {
			return fmt.Errorf("cuda: launch categorical head: %w", err)
		}
		outBytes = 12 * batch
	}
	if b.profile {
		if err := cu.Synchronize(); err != nil {
			return fmt.Errorf("cuda: kernels: %w", err)
		}
	}
	t2 := time.Now()
	if err := cu.MemcpyDtoH(b.hostOut, b.out, int64(outBytes)); err != nil {
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

// runChain launches the layers ls on x ([batch, ls[0].in] on the device).
// The last layer writes to dst where dst is not 0, else to its own buffer.
// It returns where the chain's output is.
func (b *Backend) runChain(ls []layer, x cu.DevicePtr, batch int, dst cu.DevicePtr) (cu.DevicePtr, error) {
	for i, l := range ls {
		y := l.y
		if i == len(ls)-1 && dst != 0 {
			y = dst
		}
		w, bias := b.params+cu.DevicePtr(4*l.w), b.params+cu.DevicePtr(4*l.b)
		n, k, m, act := int32(batch), int32(l.in), int32(l.out), l.act
		args := []unsafe.Pointer{unsafe.Pointer(&x), unsafe.Pointer(&w), unsafe.Pointer(&bias), unsafe.Pointer(&y),
			unsafe.Pointer(&n), unsafe.Pointer(&k), unsafe.Pointer(&m), unsafe.Pointer(&act)}
		var err error
		if l.out <= narrowMax {
			const warps = 8 // rows per block
			err = b.narrow.Launch((batch+warps-1)/warps, 1, 1, 32*warps, 1, 1, 0, cu.Stream{}, args)
		} else {
			err = b.dense.Launch((l.out+63)/64, (batch+63)/64, 1, 16, 16, 1, 0, cu.Stream{}, args)
		}
		if err != nil {
			return 0, fmt.Errorf("cuda: launch layer %d×%d: %w", l.in, l.out, err)
		}
		x = y
	}
	return x, nil
}

// Close frees the device memory and destroys the context.
func (b *Backend) Close() error {
	unlock, err := b.lock()
	if err != nil {
		return err
	}
	defer unlock()
	return b.closeLocked()
}

func (b *Backend) closeLocked() error {
	b.freeBatch()
	if b.params != 0 {
		_ = cu.MemFree(b.params)
		b.params = 0
	}
	if err := b.ctx.Destroy(); err != nil {
		return fmt.Errorf("cuda: destroy context: %w", err)
	}
	return nil
}
