//go:build cudaemu

package cudainit

// Err: the host emulator (nn/cuda/emu) needs no driver.
func Err() error { return nil }
