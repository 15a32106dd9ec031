//go:build cudaemu

package cuda

import (
	"fmt"
	"unsafe"

	"github.com/distrl/distrl/nn/cuda/emu"
)

// The host emulator (package nn/cuda/emu) in the CUDA driver's place:
// driver_cu.go's functions, for a build with the tag cudaemu. It has one
// device, cuda:0.

// DevicePtr is an address in the emulated device's memory.
type DevicePtr uintptr

// Emulated says whether this build runs the kernels on the host emulator
// (package nn/cuda/emu, the build tag cudaemu) rather than a GPU.
const Emulated = true

func deviceCount() (int, error) { return 1, nil }

func deviceLine(i int) (string, error) {
	return fmt.Sprintf("cuda:%d the host emulator (package nn/cuda/emu: kernels.cu on the CPU, for tests)", i), nil
}

type driverContext struct{}

// emulatedSMs is the multiprocessors the emulator says it has: the split
// of long sums follows it, and an H100's count makes a launch's shape the
// one a GPU gets.
const emulatedSMs = 132

func openDriver(int) (driverContext, int, error) { return driverContext{}, emulatedSMs, nil }

func (*driverContext) makeCurrent() error { return nil }
func (*driverContext) destroy() error     { return nil }

func (*driverContext) launch(name string, grid, block [3]int, words []uint64) error {
	k, ok := emu.Lookup(name)
	if !ok {
		return fmt.Errorf("cuda: kernel %s: the emulator has no such kernel", name)
	}
	if err := emu.Launch(k, grid, block, words); err != nil {
		return fmt.Errorf("cuda: launch %s: %w", name, err)
	}
	return nil
}

func memAlloc(n int64) (DevicePtr, error) {
	p, err := emu.Alloc(int(n))
	return DevicePtr(p), err
}
func memFree(p DevicePtr) error { return emu.Free(uintptr(p)) }

// MemcpyHtoD copies n bytes from the host to the device, and so do the
// other copies their ways.
func MemcpyHtoD(dst DevicePtr, src unsafe.Pointer, n int64) error {
	return emu.CopyHtoD(uintptr(dst), src, int(n))
}
func MemcpyDtoH(dst unsafe.Pointer, src DevicePtr, n int64) error {
	return emu.CopyDtoH(dst, uintptr(src), int(n))
}
func MemcpyDtoD(dst, src DevicePtr, n int64) error {
	return emu.CopyDtoD(uintptr(dst), uintptr(src), int(n))
}

// MemsetD32 sets n 4-byte words of device memory to v.
func MemsetD32(p DevicePtr, v uint32, n int64) error { return emu.MemsetD32(uintptr(p), v, int(n)) }

// Synchronize: every emulated launch and copy has finished when it returns.
func Synchronize() error { return nil }

// AllocHost allocates n bytes of host memory (the GPU's page-locked
// memory's place), outside Go's heap as the driver's is.
func AllocHost(n int) (unsafe.Pointer, error) {
	p, err := emu.AllocHost(n)
	if err != nil {
		return nil, fmt.Errorf("cuMemAllocHost(%d): %w", n, err)
	}
	return p, nil
}

// FreeHost frees what AllocHost returned.
func FreeHost(p unsafe.Pointer) { emu.FreeHost(p) }
