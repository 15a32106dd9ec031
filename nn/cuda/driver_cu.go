//go:build cuda && !cudaemu

package cuda

// #cgo LDFLAGS: -lcuda
// #include <cuda.h>
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// The CUDA driver, through gorgonia.org/cu (and cgo where it has no
// binding): the one file of this package the emulator (driver_emu.go)
// replaces.

// DevicePtr is an address in a GPU's memory.
type DevicePtr = cu.DevicePtr

// Emulated says whether this build runs the kernels on the host emulator
// (package nn/cuda/emu, the build tag cudaemu) rather than a GPU.
const Emulated = false

func deviceCount() (int, error) { return cu.NumDevices() }

func deviceLine(i int) (string, error) {
	d, err := cu.GetDevice(i)
	if err != nil {
		return "", err
	}
	name, _ := d.Name()
	maj, min, _ := d.ComputeCapability()
	mem, _ := d.TotalMem()
	return fmt.Sprintf("cuda:%d %s (compute capability %d.%d, %.1f GiB)", i, name, maj, min, float64(mem)/(1<<30)), nil
}

// driverContext is a context with the kernels loaded.
type driverContext struct {
	ctx cu.CUContext
	mod cu.Module
	fns map[string]cu.Function
}

// openDriver creates a context on GPU ordinal, current on the caller's
// (locked) thread, loads the kernels and returns the GPU's multiprocessors.
func openDriver(ordinal int) (driverContext, int, error) {
	var d driverContext
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return d, 0, fmt.Errorf("%w: cuda:%d: %v", ErrDevice, ordinal, err)
	}
	sms, err := dev.Attribute(cu.MultiprocessorCount)
	if err == nil {
		d.ctx, err = dev.MakeContext(cu.SchedAuto)
	}
	if err != nil {
		return d, 0, fmt.Errorf("%w: cuda:%d: %v", ErrDevice, ordinal, err)
	}
	if d.mod, err = cu.LoadData(ptx); err != nil {
		_ = d.ctx.Destroy()
		return d, 0, fmt.Errorf("cuda: cuda:%d: load kernels: %w", ordinal, err)
	}
	d.fns = map[string]cu.Function{}
	return d, sms, nil
}

func (d *driverContext) makeCurrent() error { return cu.SetCurrentContext(d.ctx) }

func (d *driverContext) destroy() error { return d.ctx.Destroy() }

func (d *driverContext) launch(name string, grid, block [3]int, words []uint64) error {
	fn, ok := d.fns[name]
	if !ok {
		var err error
		if fn, err = d.mod.Function(name); err != nil {
			return fmt.Errorf("cuda: kernel %s: %w", name, err)
		}
		d.fns[name] = fn
	}
	ptrs := make([]unsafe.Pointer, len(words))
	for i := range words {
		ptrs[i] = unsafe.Pointer(&words[i])
	}
	if err := fn.Launch(grid[0], grid[1], grid[2], block[0], block[1], block[2], 0, cu.Stream{}, ptrs); err != nil {
		return fmt.Errorf("cuda: launch %s: %w", name, err)
	}
	return nil
}

func memAlloc(n int64) (DevicePtr, error) { return cu.MemAlloc(n) }
func memFree(p DevicePtr) error           { return cu.MemFree(p) }

// MemcpyHtoD copies n bytes from the host to the device (the context
// current), and so do the other copies their ways.
func MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, n int64) error { return cu.MemcpyHtoD(dst, src, n) }
func MemcpyDtoH(dst unsafe.Pointer, src DevicePtr, n int64) error { return cu.MemcpyDtoH(dst, src, n) }
func MemcpyDtoD(dst, src DevicePtr, n int64) error                { return cu.MemcpyDtoD(dst, src, n) }

// MemsetD32 sets n 4-byte words of device memory to v.
func MemsetD32(p DevicePtr, v uint32, n int64) error { return cu.MemsetD32(p, v, n) }

// Synchronize waits for everything queued on the current context.
func Synchronize() error { return cu.Synchronize() }

// AllocHost allocates n bytes of page-locked host memory, which the
// device copies to and from directly (gorgonia.org/cu has no binding).
func AllocHost(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.cuMemAllocHost(&p, C.size_t(n)); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemAllocHost(%d): CUDA error %d", n, int(r))
	}
	return p, nil
}

// FreeHost frees what AllocHost returned.
func FreeHost(p unsafe.Pointer) { C.cuMemFreeHost(p) }
