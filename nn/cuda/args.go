package cuda

import (
	"fmt"
	"math"
)

// kernelArgs packs a kernel's arguments into the 8-byte words
// gorgonia.org/cu copies one of per argument: an int (which must fit a
// kernel's 32-bit int) or a float32 in the low 4 bytes, which is what the
// kernel's int or float parameter reads on a little-endian machine; a
// float64 or a device pointer (a DevicePtr, or a uintptr) whole. params
// is the kernel's parameters (signature.params): an argument of another
// kind, or a count that differs, is refused. It needs no GPU: it is the
// part of a launch a test can check anywhere.
func kernelArgs(params string, args []any) ([]uint64, error) {
	if len(args) != len(params) {
		return nil, fmt.Errorf("%d arguments for the kernel's %d parameters", len(args), len(params))
	}
	words := make([]uint64, len(args))
	for i, a := range args {
		var kind byte
		switch v := a.(type) {
		case int:
			if v != int(int32(v)) {
				return nil, fmt.Errorf("argument %d is %d, beyond a kernel's int", i, v)
			}
			kind, words[i] = 'i', uint64(uint32(int32(v)))
		case float32:
			kind, words[i] = 'f', uint64(math.Float32bits(v))
		case float64:
			kind, words[i] = 'd', math.Float64bits(v)
		case uintptr:
			kind, words[i] = 'p', uint64(v)
		default:
			p, ok := devicePtr(a)
			if !ok {
				return nil, fmt.Errorf("argument %d of type %T", i, a)
			}
			kind, words[i] = 'p', p
		}
		if kind != params[i] {
			return nil, fmt.Errorf("argument %d is %s, the kernel's parameter %s", i, kindNames[kind], kindNames[params[i]])
		}
	}
	return words, nil
}

var kindNames = map[byte]string{'p': "a pointer", 'i': "an int", 'f': "a float", 'd': "a double"}
