//go:build cuda || cudaemu

package cuda

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"github.com/distrl/distrl/internal/cudainit" // initialises the driver before cu does, with a clear message
)

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
	n, err := deviceCount()
	if err != nil {
		return nil, fmt.Errorf("%w: count devices: %v", ErrDevice, err)
	}
	var out []string
	for i := range n {
		line, err := deviceLine(i)
		if err != nil {
			return nil, fmt.Errorf("%w: device %d: %v", ErrDevice, i, err)
		}
		out = append(out, line)
	}
	return out, nil
}

// Context is a CUDA context on one GPU with the kernels loaded. A context
// is current on one OS thread at a time: Lock makes it current on the
// caller's, which it locks.
type Context struct {
	ordinal int
	drv     driverContext
	sms     int // multiprocessors, which size the split of long sums
}

// OpenContext creates a context on GPU ordinal and loads the kernels. It
// returns with the context current and the thread locked: call the
// returned unlock when done setting up.
func OpenContext(ordinal int) (*Context, func(), error) {
	if err := available(); err != nil {
		return nil, nil, err
	}
	runtime.LockOSThread()
	n, err := deviceCount()
	if err != nil {
		runtime.UnlockOSThread()
		return nil, nil, fmt.Errorf("%w: count devices: %v", ErrDevice, err)
	}
	if ordinal < 0 || ordinal >= n {
		runtime.UnlockOSThread()
		return nil, nil, fmt.Errorf("%w: cuda:%d: the driver sees %d CUDA devices", ErrDevice, ordinal, n)
	}
	drv, sms, err := openDriver(ordinal)
	if err != nil {
		runtime.UnlockOSThread()
		return nil, nil, err
	}
	return &Context{ordinal: ordinal, drv: drv, sms: sms}, runtime.UnlockOSThread, nil
}

// Lock makes the context current on this goroutine's thread, which stays
// locked until the returned function runs.
func (c *Context) Lock() (unlock func(), err error) {
	runtime.LockOSThread()
	if err := c.drv.makeCurrent(); err != nil {
		runtime.UnlockOSThread()
		return nil, fmt.Errorf("cuda: make the context current: %w", err)
	}
	return runtime.UnlockOSThread, nil
}

// Ordinal is the GPU's number.
func (c *Context) Ordinal() int { return c.ordinal }

// Launch runs the kernel name on the null stream over grid blocks of
// block threads (the context current). Each argument is an int, a
// float32, a float64 or a DevicePtr, and must be what the kernel's
// parameter in kernels.ptx is (an int, a float, a double, a pointer): a
// launch whose arguments are not is refused here, where the GPU would
// read garbage. Each is passed as the 8-byte word gorgonia.org/cu copies
// for every argument (an int's or a float32's in its low 4 bytes, which is
// what the kernel's int or float parameter reads): a pointer to a 4-byte
// Go value would have cu read 4 bytes past it.
func (c *Context) Launch(name string, grid, block [3]int, args ...any) error {
	if errSignatures != nil {
		return errSignatures
	}
	sig, ok := kernelSignatures[name]
	if !ok {
		return fmt.Errorf("cuda: kernels.ptx has no kernel %s", name)
	}
	words, err := kernelArgs(sig.params, args)
	if err != nil {
		return fmt.Errorf("cuda: %s: %w", name, err)
	}
	return c.drv.launch(name, grid, block, words)
}

// Close destroys the context, and with it every allocation made in it.
func (c *Context) Close() error {
	unlock, err := c.Lock()
	if err != nil {
		return err
	}
	defer unlock()
	if err := c.drv.destroy(); err != nil {
		return fmt.Errorf("cuda: destroy context: %w", err)
	}
	return nil
}

// Buffer is device memory of a size that grows on demand.
type Buffer struct {
	Ptr   DevicePtr
	bytes int
}

// Reserve makes b hold at least n bytes (contents lost if it grows); the
// context is current.
func (b *Buffer) Reserve(n int) error {
	if n <= b.bytes {
		return nil
	}
	b.Free()
	p, err := memAlloc(int64(n))
	if err != nil {
		return fmt.Errorf("cuda: allocate %d bytes: %w", n, err)
	}
	b.Ptr, b.bytes = p, n
	return nil
}

// Free releases b's memory (the context current).
func (b *Buffer) Free() {
	if b.Ptr != 0 {
		_ = memFree(b.Ptr)
	}
	b.Ptr, b.bytes = 0, 0
}

// blocks is how many blocks of per threads cover n.
func blocks(n, per int) [3]int { return [3]int{(n + per - 1) / per, 1, 1} }

// upload and download copy float32s (synchronously).
func upload(dst DevicePtr, src []float32) error {
	if len(src) == 0 {
		return nil
	}
	if err := MemcpyHtoD(dst, unsafe.Pointer(&src[0]), int64(4*len(src))); err != nil {
		return fmt.Errorf("cuda: copy %d values to the device: %w", len(src), err)
	}
	return nil
}

func download(dst []float32, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := MemcpyDtoH(unsafe.Pointer(&dst[0]), src, int64(4*len(dst))); err != nil {
		return fmt.Errorf("cuda: copy %d values from the device: %w", len(dst), err)
	}
	return nil
}
