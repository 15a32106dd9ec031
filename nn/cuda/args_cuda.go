//go:build cuda

package cuda

import "gorgonia.org/cu"

// devicePtr is a's address if it is a cu.DevicePtr.
func devicePtr(a any) (uint64, bool) {
	p, ok := a.(cu.DevicePtr)
	return uint64(p), ok
}
