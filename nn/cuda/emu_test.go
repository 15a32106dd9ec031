//go:build linux && amd64

package cuda

import (
	"strings"
	"testing"

	"github.com/distrl/distrl/nn/cuda/emu"
)

// TestEmulatorMatchesPTX: the host emulator runs every kernel the PTX has,
// with the parameters the PTX gives it (so that a launch the emulator
// takes, a GPU takes), and runs as coroutines exactly the kernels whose
// PTX meets at barriers or shuffles. Its own test kernels (emu_test_*)
// are the only ones the PTX lacks.
func TestEmulatorMatchesPTX(t *testing.T) {
	kernels := emu.Kernels()
	for name, sig := range kernelSignatures {
		k, ok := kernels[name]
		if !ok {
			t.Errorf("%s: in kernels.ptx, not in the emulator's table (nn/cuda/emu/emu.cc)", name)
			continue
		}
		if k.Params != sig.params {
			t.Errorf("%s: the emulator reads parameters %q, the PTX has %q", name, k.Params, sig.params)
		}
		if k.Sync != sig.sync {
			t.Errorf("%s: the emulator's sync flag is %v, the PTX's body says %v", name, k.Sync, sig.sync)
		}
	}
	for name := range kernels {
		if _, ok := kernelSignatures[name]; !ok && !strings.HasPrefix(name, "emu_test_") {
			t.Errorf("%s: in the emulator, not in kernels.ptx", name)
		}
	}
}
