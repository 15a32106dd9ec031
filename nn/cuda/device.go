//go:build cuda

package cuda

import (
	_ "embed"
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/distrl/distrl/internal/cudainit" // initialises the driver before cu does, with a clear message
	"gorgonia.org/cu"
)

//go:embed kernels.ptx
var ptx string

// ErrDevice is wrapped by the errors of the functions that open a device
// when it cannot be used: no driver, no such device, or the driver failed
// to set it up.
var ErrDevice = errors.New("cuda: device unavailable")

// ErrUnsupported is wrapped by the errors for what the kernels cannot run.
var ErrUnsupported = errors.New("cuda: not supported")

// available is ErrDevice with the driver's reason where it did not
// initialise (a test binary on a machine without a GPU gets this far).
func available() error {
	if err := cudainit.Err(); err != nil {
		return fmt.Errorf("%w: %w", ErrDevice, err)
	}
	return nil
}

// Devices lists the GPUs the driver sees, one line each: ordinal, name,
// compute capability, memory.
func Devices() ([]string, error) {
	if err := available(); err != nil {
		return nil, err
	}
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

// Context is a CUDA context on one GPU with the kernels loaded. A context
// is current on one OS thread at a time: Lock makes it current on the
// caller's, which it locks.
type Context struct {
	ordinal int
	ctx     cu.CUContext
	mod     cu.Module
	sms     int // multiprocessors, which size the split of long sums
	fns     map[string]cu.Function
}

// OpenContext creates a context on GPU ordinal and loads the kernels. It
// returns with the context current and the thread locked: call the
// returned unlock when done setting up.
func OpenContext(ordinal int) (*Context, func(), error) {
	if err := available(); err != nil {
		return nil, nil, err
	}
	runtime.LockOSThread()
	n, err := cu.NumDevices()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, nil, fmt.Errorf("%w: count devices: %v", ErrDevice, err)
	}
	if ordinal < 0 || ordinal >= n {
		runtime.UnlockOSThread()
		return nil, nil, fmt.Errorf("%w: cuda:%d: the driver sees %d CUDA devices", ErrDevice, ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err == nil {
		var c Context
		c.ordinal = ordinal
		if c.sms, err = dev.Attribute(cu.MultiprocessorCount); err == nil {
			if c.ctx, err = dev.MakeContext(cu.SchedAuto); err == nil {
				if c.mod, err = cu.LoadData(ptx); err != nil {
					_ = c.ctx.Destroy()
					runtime.UnlockOSThread()
					return nil, nil, fmt.Errorf("cuda: cuda:%d: load kernels: %w", ordinal, err)
				}
				c.fns = map[string]cu.Function{}
				return &c, runtime.UnlockOSThread, nil
			}
		}
	}
	runtime.UnlockOSThread()
	return nil, nil, fmt.Errorf("%w: cuda:%d: %v", ErrDevice, ordinal, err)
}

// Lock makes the context current on this goroutine's thread, which stays
// locked until the returned function runs.
func (c *Context) Lock() (unlock func(), err error) {
	runtime.LockOSThread()
	if err := cu.SetCurrentContext(c.ctx); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("cuda: make the context current: %w", err)
	}
	return runtime.UnlockOSThread, nil
}

// Ordinal is the GPU's number.
func (c *Context) Ordinal() int { return c.ordinal }

// Function is the kernel of kernels.cu called name (the context current).
func (c *Context) Function(name string) (cu.Function, error) {
	if fn, ok := c.fns[name]; ok {
		return fn, nil
	}
	fn, err := c.mod.Function(name)
	if err != nil {
		return fn, fmt.Errorf("cuda: kernel %s: %w", name, err)
	}
	c.fns[name] = fn
	return fn, nil
}

// Launch runs the kernel name on the null stream over grid blocks of
// block threads. Each argument is an int, a float32, a float64 or a
// cu.DevicePtr, passed as the 8-byte word gorgonia.org/cu copies for every
// argument (an int's or a float32's in its low 4 bytes, which is what the
// kernel's int or float parameter reads): a pointer to a 4-byte Go value
// would have cu read 4 bytes past it.
func (c *Context) Launch(name string, grid, block [3]int, args ...any) error {
	fn, err := c.Function(name)
	if err != nil {
		return err
	}
	words, err := kernelArgs(args)
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", name, err)
	}
	ptrs := make([]unsafe.Pointer, len(args))
	for i := range words {
		ptrs[i] = unsafe.Pointer(&words[i])
	}
	if err := fn.Launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, cu.Stream{}, ptrs); err != nil {
		return fmt.Errorf("cuda: launch %s: %w", name, err)
	}
	return nil
}

// Close destroys the context, and with it every allocation made in it.
func (c *Context) Close() error {
	unlock, err := c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.ctx.Destroy(); err != nil {
		return fmt.Errorf("cuda: destroy context: %w", err)
	}
	return nil
}

// Buffer is device memory of a size that grows on demand.
type Buffer struct {
	Ptr   cu.DevicePtr
	bytes int
}

// Reserve makes b hold at least n bytes (contents lost if it grows); the
// context is current.
func (b *Buffer) Reserve(n int) error {
	if n <= b.bytes {
		return nil
	}
	b.Free()
	p, err := cu.MemAlloc(int64(n))
	if err != nil {
		return fmt.Errorf("cuda: allocate %d bytes: %w", n, err)
	}
	b.Ptr, b.bytes = p, n
	return nil
}

// Free releases b's memory (the context current).
func (b *Buffer) Free() {
	if b.Ptr != 0 {
		_ = cu.MemFree(b.Ptr)
	}
	b.Ptr, b.bytes = 0, 0
}

// blocks is how many blocks of per threads cover n.
func blocks(n, per int) [3]int { return [3]int{(n + per - 1) / per, 1, 1} }

// upload and download copy float32s (synchronously).
func upload(dst cu.DevicePtr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	if err := cu.MemcpyHtoD(dst, unsafe.Pointer(&src[0]), int64(4*len(src))); err != nil {
		return fmt.Errorf("cuda: copy %d values to the device: %w", len(src), err)
	}
	return nil
}

func download(dst []float32, src cu.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := cu.MemcpyDtoH(unsafe.Pointer(&dst[0]), src, int64(4*len(dst))); err != nil {
		return fmt.Errorf("cuda: copy %d values from the device: %w", len(dst), err)
	}
	return nil
}
