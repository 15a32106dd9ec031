//go:build !cuda && !cudaemu

package cuda

// devicePtr: without a device there is no DevicePtr; kernelArgs takes a
// uintptr in its place, which is what the tests pass.
func devicePtr(any) (uint64, bool) { return 0, false }

// Emulated says whether this build runs the kernels on the host emulator
// (package nn/cuda/emu, the build tag cudaemu) rather than a GPU: in a
// build without a device, neither.
const Emulated = false
