package cuda

import (
	"encoding/binary"
	"math"
	"testing"
)

// TestKernelArgs: every argument becomes one 8-byte word whose first 4
// bytes (what a kernel's int or float parameter reads) are the value, and
// what does not fit is refused.
func TestKernelArgs(t *testing.T) {
	words, err := kernelArgs([]any{7, -3, float32(0.5), 1.25, uintptr(0xdeadbeef00)})
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
	for _, bad := range []any{1 << 31, -(1 << 31) - 1, int32(1), "x"} {
		if _, err := kernelArgs([]any{bad}); err == nil {
			t.Errorf("%T %v accepted", bad, bad)
		}
	}
}
