package cuda_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// pinnedNVCC is the nvcc the committed PTX was made with (Debian's
// nvidia-cuda-toolkit, make deps-cuda): another version writes other
// bytes for the same kernels, so only this one can say the PTX is stale.
const pinnedNVCC = "release 11.8"

// TestPTXUpToDate: the committed kernels.ptx is what nvcc makes of
// kernels.cu (scripts/ptx.sh, `make ptx`), so a kernel changed without
// `make ptx` fails here. It needs no GPU; without nvcc it skips.
func TestPTXUpToDate(t *testing.T) {
	nvcc, err := exec.LookPath("nvcc")
	if err != nil {
		t.Skip("nvcc not installed (make deps-cuda): the committed PTX cannot be checked")
	}
	version, err := exec.Command(nvcc, "--version").Output()
	if err != nil {
		t.Fatalf("nvcc --version: %v", err)
	}
	if !strings.Contains(string(version), pinnedNVCC) {
		t.Skipf("nvcc is not %s (the PTX's): %s", pinnedNVCC, version)
	}
	out := filepath.Join(t.TempDir(), "kernels.ptx")
	if b, err := exec.Command("../../scripts/ptx.sh", out).CombinedOutput(); err != nil {
		t.Fatalf("scripts/ptx.sh: %v\n%s", err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("kernels.ptx")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("nn/cuda/kernels.ptx is not what nvcc makes of kernels.cu: run `make ptx` and commit it")
	}
}
