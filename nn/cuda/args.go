package cuda

import (
	"fmt"
	"math"
)

// kernelArgs packs a kernel's arguments into the 8-byte words
// gorgonia.org/cu copies one of per argument: an int (which must fit a
// kernel's 32-bit int) or a float32 in the low 4 bytes, which is what the
// kernel's int or float parameter reads on a little-endian machine; a
// float64 or a device pointer (any uintptr-based type, cu.DevicePtr)
// whole. It needs no GPU: it is the part of a launch a test can check
// anywhere.
func kernelArgs(args []any) ([]uint64, error) {
	words := make([]uint64, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case int:
			if v != int(int32(v)) {
				return nil, fmt.Errorf("argument %d is %d, beyond a kernel's int", i, v)
			}
			words[i] = uint64(uint32(int32(v)))
		case float32:
			words[i] = uint64(math.Float32bits(v))
		case float64:
			words[i] = math.Float64bits(v)
		case uintptr:
			words[i] = uint64(v)
		default:
			if p, ok := devicePtr(a); ok {
				words[i] = p
				continue
			}
			return nil, fmt.Errorf("argument %d of type %T", i, a)
		}
	}
	return words, nil
}
