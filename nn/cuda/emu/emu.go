//go:build linux && amd64

package emu

// #cgo CXXFLAGS: -std=c++17 -O2 -Wno-unknown-pragmas -I${SRCDIR}
// #include <stdlib.h>
// #include "emu.h"
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrMemory is wrapped by the errors of what touches memory outside the
// emulated device's allocations (or asks for none).
var ErrMemory = errors.New("emu: not device memory")

// ErrLaunch is wrapped by the errors of a launch the emulator refuses or
// stopped: see the package doc.
var ErrLaunch = errors.New("emu: launch failed")

// Kernel is one of kernels.cu's kernels.
type Kernel struct {
	Name string
	// Params has a letter per parameter: p a pointer, i an int, f a
	// float, d a double.
	Params string
	// Sync says its threads meet at barriers or shuffles.
	Sync  bool
	index int
}

var kernels = func() map[string]Kernel {
	m := map[string]Kernel{}
	for i := range int(C.emu_kernel_count()) {
		k := Kernel{Name: C.GoString(C.emu_kernel_name(C.int(i))), Params: C.GoString(C.emu_kernel_kinds(C.int(i))),
			Sync: C.emu_kernel_sync(C.int(i)) != 0, index: i}
		m[k.Name] = k
	}
	return m
}()

// Kernels lists the kernels the emulator runs, by name.
func Kernels() map[string]Kernel {
	out := make(map[string]Kernel, len(kernels))
	for n, k := range kernels {
		out[n] = k
	}
	return out
}

// Lookup returns the kernel called name.
func Lookup(name string) (Kernel, bool) {
	k, ok := kernels[name]
	return k, ok
}

// Alloc allocates n bytes of emulated device memory, its bytes 0xff.
func Alloc(n int) (uintptr, error) {
	if n <= 0 {
		return 0, fmt.Errorf("%w: allocate %d bytes", ErrMemory, n)
	}
	p := uintptr(C.emu_alloc(C.size_t(n)))
	if p == 0 {
		return 0, fmt.Errorf("emu: allocate %d bytes: out of memory", n)
	}
	return p, nil
}

// Free releases what Alloc returned.
func Free(p uintptr) error {
	if C.emu_free(C.uintptr_t(p)) != 0 {
		return fmt.Errorf("%w: free %#x, which no allocation starts at", ErrMemory, p)
	}
	return nil
}

// Valid says whether [p, p+n) lies in one allocation.
func Valid(p uintptr, n int) bool { return n >= 0 && C.emu_valid(C.uintptr_t(p), C.size_t(n)) != 0 }

// CopyHtoD copies n bytes from host memory src to dst.
func CopyHtoD(dst uintptr, src unsafe.Pointer, n int) error {
	if C.emu_htod(C.uintptr_t(dst), src, C.size_t(n)) != 0 {
		return fmt.Errorf("%w: copy %d bytes to %#x", ErrMemory, n, dst)
	}
	return nil
}

// CopyDtoH copies n bytes from src to host memory dst.
func CopyDtoH(dst unsafe.Pointer, src uintptr, n int) error {
	if C.emu_dtoh(dst, C.uintptr_t(src), C.size_t(n)) != 0 {
		return fmt.Errorf("%w: copy %d bytes from %#x", ErrMemory, n, src)
	}
	return nil
}

// CopyDtoD copies n bytes between allocations.
func CopyDtoD(dst, src uintptr, n int) error {
	if C.emu_dtod(C.uintptr_t(dst), C.uintptr_t(src), C.size_t(n)) != 0 {
		return fmt.Errorf("%w: copy %d bytes from %#x to %#x", ErrMemory, n, src, dst)
	}
	return nil
}

// MemsetD32 sets n 4-byte words from p to v.
func MemsetD32(p uintptr, v uint32, n int) error {
	if C.emu_memset32(C.uintptr_t(p), C.uint32_t(v), C.size_t(n)) != 0 {
		return fmt.Errorf("%w: set %d words at %#x", ErrMemory, n, p)
	}
	return nil
}

// Launch runs k over grid blocks of block threads with its arguments as
// the 8-byte words a CUDA launch copies (nn/cuda's kernelArgs), and
// returns when every thread has finished.
func Launch(k Kernel, grid, block [3]int, words []uint64) error {
	for _, d := range append(grid[:], block[:]...) {
		if d <= 0 || d > 1<<31-1 {
			return fmt.Errorf("%w: %s: grid %v of blocks %v", ErrLaunch, k.Name, grid, block)
		}
	}
	var w *C.uint64_t
	if len(words) > 0 {
		w = (*C.uint64_t)(unsafe.Pointer(&words[0]))
	}
	var msg [256]C.char
	if C.emu_launch(C.int(k.index), C.uint(grid[0]), C.uint(grid[1]), C.uint(grid[2]), C.uint(block[0]), C.uint(block[1]),
		C.uint(block[2]), w, C.int(len(words)), &msg[0], C.int(len(msg))) != 0 {
		return fmt.Errorf("%w: %s: %s", ErrLaunch, k.Name, C.GoString(&msg[0]))
	}
	return nil
}

// AllocHost allocates n bytes of host memory outside Go's heap (C's), as
// a driver's page-locked memory is.
func AllocHost(n int) (unsafe.Pointer, error) {
	if n <= 0 {
		return nil, fmt.Errorf("%w: allocate %d bytes", ErrMemory, n)
	}
	p := C.malloc(C.size_t(n))
	if p == nil {
		return nil, fmt.Errorf("emu: allocate %d host bytes: out of memory", n)
	}
	return p, nil
}

// FreeHost frees what AllocHost returned.
func FreeHost(p unsafe.Pointer) { C.free(p) }
