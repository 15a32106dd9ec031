package cuda

import (
	"encoding/binary"
	"math"
	"strings"
	"testing"
)

// TestKernelArgs: every argument becomes one 8-byte word whose first 4
// bytes (what a kernel's int or float parameter reads) are the value, and
// what does not fit is refused.
func TestKernelArgs(t *testing.T) {
	words, err := kernelArgs("iifdp", []any{7, -3, float32(0.5), 1.25, uintptr(0xdeadbeef00)})
	if err != nil {
		t.Fatal(err)
	}
	low := func(w uint64) []byte {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint64(b, w)
		return b[:4]
	}
	if got := int32(binary.LittleEndian.Uint32(low(words[0]))); got != 7 {
		t.Errorf("int 7 reads as %d", got)
	}
	if got := int32(binary.LittleEndian.Uint32(low(words[1]))); got != -3 {
		t.Errorf("int -3 reads as %d", got)
	}
	if got := math.Float32frombits(binary.LittleEndian.Uint32(low(words[2]))); got != 0.5 {
		t.Errorf("float32 0.5 reads as %v", got)
	}
	if got := math.Float64frombits(words[3]); got != 1.25 {
		t.Errorf("float64 1.25 reads as %v", got)
	}
	if words[4] != 0xdeadbeef00 {
		t.Errorf("pointer reads as %#x", words[4])
	}
}

// TestKernelArgsRefused: an argument the kernel's parameter is not, in
// kind or in number, is refused with what was wrong.
func TestKernelArgsRefused(t *testing.T) {
	for _, c := range []struct {
		name, params string
		args         []any
		want         string
	}{
		{"int too large", "i", []any{1 << 31}, "beyond a kernel's int"},
		{"int too small", "i", []any{-(1 << 31) - 1}, "beyond a kernel's int"},
		{"int32", "i", []any{int32(1)}, "of type int32"},
		{"string", "p", []any{"x"}, "of type string"},
		{"float32 for an int", "i", []any{float32(1)}, "argument 0 is a float, the kernel's parameter an int"},
		{"int for a pointer", "pi", []any{3, 3}, "argument 0 is an int, the kernel's parameter a pointer"},
		{"float64 for a float32", "pf", []any{uintptr(8), 0.5}, "argument 1 is a double, the kernel's parameter a float"},
		{"pointer for a double", "d", []any{uintptr(8)}, "argument 0 is a pointer, the kernel's parameter a double"},
		{"one too few", "pii", []any{uintptr(8), 1}, "2 arguments for the kernel's 3 parameters"},
		{"one too many", "p", []any{uintptr(8), 1}, "2 arguments for the kernel's 1 parameters"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := kernelArgs(c.params, c.args)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("kernelArgs(%q, %v) = %v, want an error saying %q", c.params, c.args, err, c.want)
			}
		})
	}
}

// TestPTXSignatures: every kernel of kernels.cu is in the embedded PTX with
// its parameters as kernels.cu declares them (spot-checked), and a module
// the parser cannot read is an error, not a guess.
func TestPTXSignatures(t *testing.T) {
	if errSignatures != nil {
		t.Fatal(errSignatures)
	}
	for name, want := range map[string]signature{
		"adam_guarded":    {"ppppipfffff", false},
		"sumsq":           {"pip", true},
		"dense_narrow":    {"ppppiiii", true},
		"gather_rows":     {"pppii", false},
		"ppo_loss":        {"ppppppppiiddddippp", false},
		"surrogate_guard": {"pipifdddp", true},
	} {
		if got := kernelSignatures[name]; got != want {
			t.Errorf("%s: %+v, want %+v", name, got, want)
		}
	}
	if n := len(kernelSignatures); n != 22 {
		t.Errorf("%d kernels, want kernels.cu's 22", n)
	}
	for _, bad := range []string{
		"",
		".visible .entry k(\n\t.param .b8 k_param_0[16]\n)\n{\n}\n",
		".visible .entry k\n",
		".visible .entry k(\n)\n.visible .entry k(\n)\n",
	} {
		if sigs, err := ptxSignatures(bad); err == nil {
			t.Errorf("ptxSignatures(%q) = %v, want an error", bad, sigs)
		}
	}
}
