//go:build !cuda && !cudaemu

package main

// accel: rlctl runs policies on the CPU alone.
var accel accelerator
