//go:build cuda || cudaemu

package cuda

// devicePtr is a's address if it is a DevicePtr.
func devicePtr(a any) (uint64, bool) {
	p, ok := a.(DevicePtr)
	return uint64(p), ok
}
