package api

import "math"

// FirstNonFinite is the index of the first NaN or infinity in x, or -1.
//
// Learners check every observation, reward, log-probability and value they
// are sent before an update can be spoilt by one; a MinAtar batch is 25,600
// observations per 64 steps. A float32 is not finite exactly when its
// exponent bits are all set, and adding one to that exponent field carries
// into bit 31: eight values are tested with one branch.
func FirstNonFinite(x []float32) int {
	const exp, carry = 0x7f800000, 0x00800000
	i := 0
	for ; i+8 <= len(x); i += 8 {
		v := x[i : i+8 : i+8]
		var bad uint32
		for _, f := range v {
			bad |= math.Float32bits(f)&exp + carry
		}
		if bad&(1<<31) != 0 {
			break
		}
	}
	for ; i < len(x); i++ {
		if math.Float32bits(x[i])&exp == exp {
			return i
		}
	}
	return -1
}

// AllFinite reports whether x holds no NaN and no infinity.
func AllFinite(x []float32) bool { return FirstNonFinite(x) < 0 }
