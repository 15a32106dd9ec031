//go:build linux && amd64

package emu

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unsafe"
)

// dev allocates n float32s (or the 4-byte words of ints) on the emulated
// device, freed at the test's end.
func dev(t *testing.T, n int) uintptr {
	t.Helper()
	p, err := Alloc(4 * n)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Free(p); err != nil {
			t.Error(err)
		}
	})
	return p
}

func put[T any](t *testing.T, dst uintptr, src []T) {
	t.Helper()
	if err := CopyHtoD(dst, unsafe.Pointer(&src[0]), len(src)*int(unsafe.Sizeof(src[0]))); err != nil {
		t.Fatal(err)
	}
}

func get[T any](t *testing.T, dst []T, src uintptr) {
	t.Helper()
	if err := CopyDtoH(unsafe.Pointer(&dst[0]), src, len(dst)*int(unsafe.Sizeof(dst[0]))); err != nil {
		t.Fatal(err)
	}
}

func launch(t *testing.T, name string, grid, block [3]int, words ...uint64) error {
	t.Helper()
	k, ok := Lookup(name)
	if !ok {
		t.Fatalf("no kernel %s", name)
	}
	return Launch(k, grid, block, words)
}

func f32(v float32) uint64 { return uint64(math.Float32bits(v)) }

// TestBarriers: sumsq and sumsq_final add through shared memory between
// __syncthreads, over several blocks and a grid-stride loop; the sum is the
// one the blocks' threads could only get by meeting at each barrier.
func TestBarriers(t *testing.T) {
	const n, nb = 5000, 3
	g := make([]float32, n)
	want := 0.0
	for i := range g {
		g[i] = float32(i%17) - 8
		want += float64(g[i]) * float64(g[i])
	}
	dg, dp := dev(t, n), dev(t, 2*nb)
	put(t, dg, g)
	if err := launch(t, "sumsq", [3]int{nb, 1, 1}, [3]int{256, 1, 1}, uint64(dg), n, uint64(dp)); err != nil {
		t.Fatal(err)
	}
	if err := launch(t, "sumsq_final", [3]int{1, 1, 1}, [3]int{256, 1, 1}, uint64(dp), nb); err != nil {
		t.Fatal(err)
	}
	got := make([]float64, 1)
	get(t, got, dp)
	if got[0] != want {
		t.Errorf("sum of squares %v, want %v", got[0], want)
	}
}

// TestShuffles: dense_narrow meets its lanes' partial sums by warp
// shuffles; a row's output is its dot product only if every lane's value
// reached lane 0.
func TestShuffles(t *testing.T) {
	const rows, k, m = 5, 100, 3
	x, w, b := make([]float32, rows*k), make([]float32, k*m), []float32{0.5, -1, 2}
	for i := range x {
		x[i] = float32(i%7) * 0.25
	}
	for i := range w {
		w[i] = float32(i%5) - 2
	}
	dx, dw, db, dy := dev(t, len(x)), dev(t, len(w)), dev(t, m), dev(t, rows*m)
	put(t, dx, x)
	put(t, dw, w)
	put(t, db, b)
	// Two warps a block, so that the last block has a warp whose row is past the batch.
	if err := launch(t, "dense_narrow", [3]int{3, 1, 1}, [3]int{64, 1, 1}, uint64(dx), uint64(dw), uint64(db), uint64(dy), rows, k, m, 0); err != nil {
		t.Fatal(err)
	}
	y := make([]float32, rows*m)
	get(t, y, dy)
	for r := range rows {
		for j := range m {
			want := float64(b[j])
			for i := range k {
				want += float64(x[r*k+i]) * float64(w[i*m+j])
			}
			if got := float64(y[r*m+j]); math.Abs(got-want) > 1e-4*math.Max(1, math.Abs(want)) {
				t.Errorf("y[%d][%d] = %v, want %v", r, j, got, want)
			}
		}
	}
}

// TestRefused: what a GPU would run wrong, the emulator refuses with why.
func TestRefused(t *testing.T) {
	p := dev(t, 256)
	for _, c := range []struct {
		name, kernel string
		grid, block  [3]int
		words        []uint64
		want         string
	}{
		{"too few arguments", "sumsq", [3]int{1, 1, 1}, [3]int{256, 1, 1}, []uint64{uint64(p), 4}, "2 arguments for the kernel's 3 parameters"},
		{"host pointer", "sumsq", [3]int{1, 1, 1}, [3]int{256, 1, 1}, []uint64{uint64(uintptr(unsafe.Pointer(&t))), 4, uint64(p)}, "argument 0"},
		{"pointer past an allocation", "act_grad", [3]int{1, 1, 1}, [3]int{32, 1, 1}, []uint64{uint64(p), uint64(p + 4*256 + 4096), 4, 1}, "argument 1"},
		{"block too large", "act_grad", [3]int{1, 1, 1}, [3]int{2048, 1, 1}, []uint64{uint64(p), uint64(p), 4, 1}, "is not a launch"},
		{"empty grid", "act_grad", [3]int{0, 1, 1}, [3]int{32, 1, 1}, []uint64{uint64(p), uint64(p), 4, 1}, "grid"},
		{"divergent barrier", "emu_test_diverge", [3]int{1, 1, 1}, [3]int{64, 1, 1}, []uint64{uint64(p)}, "after others had exited"},
		{"shuffle beside a barrier", "emu_test_mixed", [3]int{1, 1, 1}, [3]int{64, 1, 1}, []uint64{uint64(p)}, "deadlock"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := launch(t, c.kernel, c.grid, c.block, c.words...)
			if !errors.Is(err, ErrLaunch) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("launch = %v, want ErrLaunch saying %q", err, c.want)
			}
		})
	}
	// After a refusal the emulator runs the next launch as ever.
	TestBarriers(t)
}

// TestMemory: new memory is NaN, copies stay inside one allocation, and a
// free of what was never allocated is refused.
func TestMemory(t *testing.T) {
	p := dev(t, 10)
	fresh := make([]float32, 10)
	get(t, fresh, p)
	for i, v := range fresh {
		if !math.IsNaN(float64(v)) {
			t.Fatalf("new memory [%d] = %v, want NaN", i, v)
		}
	}
	buf := make([]float32, 11)
	for _, err := range []error{
		CopyHtoD(p, unsafe.Pointer(&buf[0]), 44),
		CopyDtoH(unsafe.Pointer(&buf[0]), p+4, 40),
		CopyDtoD(p, p+8, 40),
		MemsetD32(p, 0, 11),
		Free(p + 4),
	} {
		if !errors.Is(err, ErrMemory) {
			t.Errorf("%v, want ErrMemory", err)
		}
	}
	if _, err := Alloc(0); !errors.Is(err, ErrMemory) {
		t.Errorf("Alloc(0): %v, want ErrMemory", err)
	}
	if err := MemsetD32(p, math.Float32bits(1.5), 10); err != nil {
		t.Fatal(err)
	}
	get(t, buf[:10], p)
	if buf[9] != 1.5 {
		t.Errorf("after MemsetD32: %v", buf[:10])
	}
	if !Valid(p, 40) || Valid(p, 41) || Valid(p-4, 4) {
		t.Error("Valid disagrees with the allocation [p, p+40)")
	}
}

// TestDirectKernel: a kernel without barriers (adam) runs its threads
// straight through, over blocks whose last is partly past n.
func TestDirectKernel(t *testing.T) {
	const n = 300
	dp, dg, dm, dv := dev(t, n), dev(t, n), dev(t, n), dev(t, n)
	ones, zeros := make([]float32, n), make([]float32, n)
	for i := range ones {
		ones[i] = 1
	}
	put(t, dp, zeros)
	put(t, dg, ones)
	put(t, dm, zeros)
	put(t, dv, zeros)
	if err := launch(t, "adam", [3]int{2, 1, 1}, [3]int{256, 1, 1}, uint64(dp), uint64(dg), uint64(dm), uint64(dv), n,
		f32(1), f32(0.9), f32(0.999), f32(1e-8), f32(0.01), f32(1)); err != nil {
		t.Fatal(err)
	}
	p := make([]float32, n)
	get(t, p, dp)
	// m = 0.1, v = 0.001: p = -0.01·0.1/(sqrt(0.001)+1e-8).
	want := -0.01 * 0.1 / (math.Sqrt(0.001) + 1e-8)
	for i, v := range p {
		if math.Abs(float64(v)-want) > 1e-6 {
			t.Fatalf("p[%d] = %v, want %v", i, v, want)
		}
	}
}

// TestSourcesHash: sources.go has the hash of the kernel sources as they
// are, so that a change to them rebuilds this package (see
// scripts/emu-sources.sh) rather than leaving the emulator running the old
// kernels from Go's build cache; and its list has every file they include
// from nn/cuda, so that none changes unhashed.
func TestSourcesHash(t *testing.T) {
	h := sha256.New()
	include := regexp.MustCompile(`(?m)^\s*#include "([^"]+)"`)
	for _, f := range sourceFiles {
		b, err := os.ReadFile(filepath.Join("..", f))
		if err != nil {
			t.Fatal(err)
		}
		h.Write(b)
		for _, m := range include.FindAllSubmatch(b, -1) {
			if inc := string(m[1]); !slices.Contains(sourceFiles, inc) {
				t.Errorf("%s includes %s, which scripts/emu-sources.sh does not hash: add it to its files", f, inc)
			}
		}
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != sourcesHash {
		t.Errorf("the kernel sources hash to %s, sources.go says %s: run scripts/emu-sources.sh (or make ptx)", got, sourcesHash)
	}
}

// TestOrderFlips: consecutive launches run a block's threads in opposite
// orders, so a kernel racing its threads for one word (emu_test_race) ends
// with the first thread's value once and the last's the next time.
func TestOrderFlips(t *testing.T) {
	p := dev(t, 1)
	seen := map[int32]bool{}
	for range 2 {
		if err := launch(t, "emu_test_race", [3]int{1, 1, 1}, [3]int{64, 1, 1}, uint64(p)); err != nil {
			t.Fatal(err)
		}
		got := make([]int32, 1)
		get(t, got, p)
		seen[got[0]] = true
	}
	if !seen[0] || !seen[63] {
		t.Errorf("two launches left %v, want 0 once and 63 once", seen)
	}
}

// TestOverrunFaults: a kernel that reads past an allocation's end faults
// rather than reading what lies beyond: gather_rows with a row index past
// its source, in a child process (the fault ends it).
func TestOverrunFaults(t *testing.T) {
	if os.Getenv("EMU_OVERRUN_CHILD") == "1" {
		src, idx, dst := dev(t, 4), dev(t, 1), dev(t, 4)
		put(t, idx, []int32{2}) // row 2 of 4-value rows: values 8-11 of 4
		_ = launch(t, "gather_rows", [3]int{1, 1, 1}, [3]int{32, 1, 1}, uint64(src), uint64(idx), uint64(dst), 1, 4)
		t.Fatal("the overrun did not fault")
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestOverrunFaults$")
	cmd.Env = append(os.Environ(), "EMU_OVERRUN_CHILD=1")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "SIGSEGV") {
		t.Errorf("the child ended with %v, want a SIGSEGV:\n%s", err, out)
	}
}
